"""The broker: what official clients, mqadmin and the name servers talk to on listenPort (and listenPort-2).

* :mod:`.service` — ``Broker`` (start/stop, registration, periodic tasks) and ``start_broker`` for the CLI.
* :mod:`.processors` — one module per concern (send, pull, client, offsets, retry, query, admin); each
  handler takes ``(cmd, channel)`` and returns a response, None or a Deferred.
* :mod:`.context` — the shared state handed to every processor.
* Tables: :mod:`.topics` (topics.json), :mod:`.subscriptions` (subscriptionGroup.json), :mod:`.offsets`
  (consumerOffset.json), :mod:`.clients` (producers/consumers from heartbeats), :mod:`.locks` (orderly queues).
* :mod:`.longpoll` holds pulls until data arrives; :mod:`.filter` matches TAG subscriptions by hash.
* :mod:`.schedule` delivers delay-level messages (SCHEDULE_TOPIC_XXXX); :mod:`.transactions` keeps half
  messages, END_TRANSACTION and check-back (basic versions; SQL92 and timers are issue 5).
* :mod:`.store_port` / :mod:`.store_adapter` — the broker's view of ``server.store.MessageStore``.
* :mod:`.registration` — REGISTER_BROKER / UNREGISTER_BROKER with every name server.
"""
