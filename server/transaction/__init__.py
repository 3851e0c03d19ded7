"""Transactional messages: half messages, END_TRANSACTION, and the check-back service."""
