"""The name server: route registry (registry), KV config (kvconfig), request processor (processor) and
the running service (service.NameServer)."""
