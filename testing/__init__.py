"""Test support for applications using FerryMQ: a broker in a container for their tests."""
