"""Queue allocation among a group's consumers (Java ``AllocateMessageQueueAveragely``).

Every consumer computes its share from the same sorted lists, so the shares cover all queues exactly
once without any coordination: consumer i of n gets a contiguous block, the first ``len % n`` consumers
one queue more.
"""

from __future__ import annotations

from collections.abc import Iterable

from ferrymq.wire.bodies import MessageQueue


def sort_queues(mqs: Iterable[MessageQueue]) -> list[MessageQueue]:
    """Java's MessageQueue order: topic, broker name, queue id."""
    return sorted(mqs, key=lambda q: (q.topic or "", q.broker_name or "", q.queue_id))


def allocate_average(current_cid: str, mqs: Iterable[MessageQueue], cids: Iterable[str]) -> list[MessageQueue]:
    """The queues ``current_cid`` should own; empty if it is not among ``cids`` (the broker does not
    know it yet) or there are more consumers than queues and it comes late in the order."""
    mq_all = sort_queues(mqs)
    cid_all = sorted(set(cids))
    if current_cid not in cid_all or not mq_all:
        return []
    index = cid_all.index(current_cid)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]
