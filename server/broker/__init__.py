"""The broker: what official clients, mqadmin and the name servers talk to on listenPort (and listenPort-2).

* :mod:`.service` — ``Broker`` (start/stop, registration, periodic tasks) and ``start_broker`` for the CLI;
  :mod:`.wiring` — ``build_broker``, the one place its parts are put together (:mod:`.parts` types them).
* :mod:`.processors` — one module per concern (send, pull, client, offsets, retry, query, admin,
  end_transaction); each handler takes the decoded header its request declares (``ferrymq.wire.requests``)
  and returns a response, None or a Deferred, or raises a ``Refusal``.
* :mod:`.context` — the shared state handed to every processor.
* Tables: :mod:`.topics` (topics.json), :mod:`.subscriptions` (subscriptionGroup.json), :mod:`.offsets`
  (consumerOffset.json), :mod:`.clients` (producers/consumers from heartbeats), :mod:`.locks` (orderly queues).
* :mod:`.longpoll` holds pulls until data arrives; :mod:`.tag_subscriptions` matches TAG subscriptions by
  hash; :mod:`.sql_subscriptions` compiles SQL92 subscriptions per (group, topic) and evaluates them at pull time.
* :mod:`.parking` parks timer and delay-level messages on send (the delivery services are
  ``ferrymq.server.schedule``); :mod:`.processors.end_transaction` stores half messages, answers
  END_TRANSACTION and sends CHECK_TRANSACTION_STATE (the half-message service is ``ferrymq.server.transaction``).
* :mod:`.store_port` / :mod:`.store_adapter` — the broker's view of ``ferrymq.server.store.MessageStore``.
* :mod:`.registration` / :mod:`.namesrv_peer` — REGISTER_BROKER / UNREGISTER_BROKER with every name server.
"""
