"""The broker: what official clients, mqadmin and the name servers talk to on listenPort (and listenPort-2).

* :mod:`.service` — ``Broker`` (start/stop, registration, periodic tasks) and ``start_broker`` for the CLI.
* :mod:`.processors` — one module per concern (send, pull, client, offsets, retry, query, admin); each
  handler takes ``(cmd, channel)`` and returns a response, None or a Deferred.
* :mod:`.context` — the shared state handed to every processor.
* Tables: :mod:`.topics` (topics.json), :mod:`.subscriptions` (subscriptionGroup.json), :mod:`.offsets`
  (consumerOffset.json), :mod:`.clients` (producers/consumers from heartbeats), :mod:`.locks` (orderly queues).
* :mod:`.longpoll` holds pulls until data arrives; :mod:`.filter` matches TAG subscriptions by hash;
  :mod:`.sqlfilter` compiles SQL92 subscriptions per (group, topic) and evaluates them at pull time.
* Thin adapters over :mod:`server.schedule` and :mod:`server.transaction`: :mod:`.schedule` parks timer
  and delay-level messages on send (and builds the two delivery services); :mod:`.transactions` stores
  half messages, answers END_TRANSACTION and sends CHECK_TRANSACTION_STATE to a live producer.
* :mod:`.store_port` / :mod:`.store_adapter` — the broker's view of ``server.store.MessageStore``.
* :mod:`.registration` — REGISTER_BROKER / UNREGISTER_BROKER with every name server.
"""
