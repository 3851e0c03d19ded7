"""MessageStore: the facade the broker uses (Apache ``DefaultMessageStore``).

Threading contract: ``put_*``, ``get_message`` and the other calls are made from ONE thread (the
reactor). Background threads fsync (group commit, periodic flush), preallocate segments, and clean
old files; none of them blocks the caller. Everything works without a running reactor: results are
plain objects, flush waits are callbacks (:meth:`wait_flush`) or futures (:meth:`put_message_future`);
``server.store.twisted_adapter`` turns them into Deferreds.

Dispatch is synchronous: when ``put_message`` returns, the record is in its consume queue and the
index, and arriving listeners (long polling) have been called (:mod:`.dispatch`, the step puts, recovery
and replication share).
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from concurrent.futures import Future
from typing import Callable, Iterable, Iterator

from ferrymq.wire.message import (
    BatchEntry,
    MessageConst,
    MessageExt,
    RecordInfo,
    decode_properties,
    RecordError,
    record_parts,
    record_template,
    write_record,
    decode_record,
    encode_batch,
    encode_properties,
    peek_record,
    tags_code as compute_tags_code,
)
from ferrymq.wire import batch as wire_batch
from ferrymq.wire.msgid import offset_msg_id_prefix

from .checkpoint import StoreCheckpoint
from .commitlog import CommitLog
from .config import MessageStoreConfig
from .consume_queue import PAD_SIZE, UNIT, UNIT_SIZE, ConsumeQueue
from .dispatch import SCHEDULE_TOPIC, ArrivingListener, Dispatcher
from .dispatch import TX_PREPARED as _TX_PREPARED
from .dispatch import TX_ROLLBACK as _TX_ROLLBACK
from .message_filter import MessageFilter
from .flush import DemandService, GroupCommitService, PeriodicService
from .index import IndexService, key_items
from .mapped_file import PREPARE_STEP, AllocationError, segment_name
from .retention import CleanService, disk_usage_ratio
from .status import GetMessageResult, GetMessageStatus, PutMessageResult, PutMessageStatus, QueryMessageResult

log = logging.getLogger(__name__)

#: Apache's MAX_PULL_MSG_SIZE: a pull never carries more than this
MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
_G = GetMessageStatus
_P = PutMessageStatus



class StoreLockedError(RuntimeError):
    pass


def total_memory() -> int:
    """Physical memory in bytes (8 GiB when the system does not say): the base of accessMessageInMemoryMaxRatio."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class MessageStore:
    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        call_from_thread: Callable[..., None] | None = None,
        disk_usage: Callable[[str], float] | None = None,
    ):
        """``call_from_thread(fn, *args)`` moves completions from store threads to the caller's thread
        (Twisted: ``reactor.callFromThread``); by default they run on the store thread.
        ``disk_usage(path) -> ratio 0..1`` is replaceable for tests."""
        self.config = config
        self.store_host = config.store_host
        self.commitlog = CommitLog(config.storePathCommitLog, config.mappedFileSizeCommitLog, None)
        self.cqs: dict[str, dict[int, ConsumeQueue]] = {}
        self.index = IndexService(config.index_dir, config.maxHashSlotNum, config.maxIndexNum)
        self.checkpoint: StoreCheckpoint | None = None
        self.running = False
        self.disk_full = False
        #: a segment could not be created; cleared by the disk check once one fits again
        self.allocation_failed = False
        self.last_exit_ok = True
        self.recovery_report: dict = {}
        self._call = call_from_thread
        self.disk_usage = disk_usage or disk_usage_ratio
        self._group_commit: GroupCommitService | None = None
        self._periodic: PeriodicService | None = None
        self._prefault: DemandService | None = None
        self._lock_fd = -1
        self._memory_limit = total_memory() * config.accessMessageInMemoryMaxRatio // 100
        self.cleaner = CleanService(self)
        self._allocator = None
        self._id_prefix = offset_msg_id_prefix(self.store_host)
        self._index_enabled = config.messageIndexEnable
        self.dispatcher = Dispatcher(self._cq_for_write, self.index, index_enabled=config.messageIndexEnable,
                                     delay_ms=config.delay_level_millis())
        self._dispatch = self.dispatcher.dispatch
        #: largest record (or batch) accepted: maxMessageSize, and it must fit in a segment with a blank marker
        self._max_record = min(config.maxMessageSize, config.mappedFileSizeCommitLog - 8)

    # ------------------------------------------------------------------------------------------
    # lifecycle
    # ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Lock the store directory, load, recover, and start the background services."""
        from .mapped_file import Allocator

        cfg = self.config
        os.makedirs(cfg.storePathRootDir, exist_ok=True)
        self._lock_fd = os.open(cfg.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise StoreLockedError(
                f"{cfg.lock_path} is locked: another broker uses storePathRootDir {cfg.storePathRootDir}"
            ) from None
        try:
            self._start_locked(Allocator())
        except BaseException:
            # a store that failed to start (unreadable segment, bad config) must not keep the lock
            self._stop_threads()
            self.commitlog.queue.close()
            for cq in self._all_cqs():
                cq.queue.close()
            self.index.close()
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise

    def _start_locked(self, allocator) -> None:
        cfg = self.config
        self._allocator = allocator
        self.commitlog = CommitLog(cfg.storePathCommitLog, cfg.mappedFileSizeCommitLog, self._allocator)
        self.last_exit_ok = not os.path.exists(cfg.abort_path)
        self.checkpoint = StoreCheckpoint.open(cfg.checkpoint_path)
        self.commitlog.queue.load()
        self._load_consume_queues()
        self.index.load()
        self._recover()
        # have the segment the next append needs ready before the first put
        q = self.commitlog.queue
        if not q.files or q.files[-1].full:
            nxt = q.files[-1].end if q.files else 0
            self._allocator.request(os.path.join(q.dir, segment_name(nxt)), q.file_size)
        with open(cfg.abort_path, "wb") as f:
            os.fsync(f.fileno())
        self.checkpoint.clean_shutdown_offset = -1
        self.checkpoint.flush()
        if cfg.sync_flush:
            self._group_commit = GroupCommitService(self.commitlog.flush)
            self._group_commit.start()
        p = PeriodicService()
        p.add(cfg.flushIntervalCommitLog, self._flush_commitlog_task)
        p.add(cfg.flushIntervalConsumeQueue, self._flush_logics_task)
        p.add(min(cfg.cleanResourceInterval, 1000), self.cleaner.check_disk)
        p.add(cfg.cleanResourceInterval, self.cleaner.run)
        p.start()
        self._periodic = p
        if cfg.warmMapedFileEnable:
            pf = DemandService(self._prefault_task, "store-prefault")
            pf.start()
            self._prefault = pf
            self.commitlog.on_ahead = pf.wake
        self.running = True

    def shutdown(self) -> None:
        """Orderly stop: flush everything, write the checkpoint, remove the abort file."""
        if self._lock_fd < 0:
            return
        self._stop_threads()
        cl_end = self.commitlog.max_offset
        self.commitlog.flush()
        for cq in self._all_cqs():
            cq.flush()
        self.index.flush()
        cp = self.checkpoint
        cp.physic_flushed_offset = cp.logics_flushed_offset = cp.index_flushed_offset = cl_end
        cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = int(time.time() * 1000)
        cp.clean_shutdown_offset = cl_end
        cp.flush()
        self.commitlog.queue.close()
        for cq in self._all_cqs():
            cq.queue.close()
        self.index.close()
        try:
            os.unlink(self.config.abort_path)
        except FileNotFoundError:
            pass
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)
        self._lock_fd = -1

    def _stop_threads(self) -> None:
        """Stop accepting puts and every store thread (pending group commits are flushed first)."""
        self.running = False
        for service in (self._group_commit, self._periodic, self._prefault):
            if service is not None:
                service.stop()
        if self._allocator is not None:
            self._allocator.shutdown()

    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        if not os.path.isdir(root):
            return
        for topic in os.listdir(root):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for qid in os.listdir(tdir):
                try:
                    queue_id = int(qid)
                except ValueError:
                    continue
                cq = ConsumeQueue(root, topic, queue_id, self.config.mappedFileSizeConsumeQueue)
                cq.load()
                self.cqs.setdefault(topic, {})[queue_id] = cq

    # ------------------------------------------------------------------------------------------
    # recovery
    # ------------------------------------------------------------------------------------------

    def _recover(self) -> None:
        """Find the valid end of the commit log and make consume queues and index agree with it.

        After a clean shutdown the checkpoint says where the log ends; after a crash (abort file
        present) records are re-validated (magic, size, position, CRC) from the last point where
        everything was flushed and dispatched, each one is re-dispatched, the torn tail is cut off,
        and consume-queue units that point past the end are dropped.
        """
        t0 = time.monotonic()
        cfg = self.config
        cl = self.commitlog
        cp = self.checkpoint
        for cq in self._all_cqs():
            cq.recover()
        files = cl.queue.files
        redispatched = 0
        index_from = self.index.end_phy if self.index.files else -1
        dispatch_record = self.dispatcher.dispatch_record

        def redispatch(info: RecordInfo, phys: int) -> None:
            nonlocal redispatched
            redispatched += 1
            dispatch_record(info, phys, phys > index_from, False)

        if not files:
            start, stop = 0, None
            end = 0
        else:
            lo, hi = files[0].start, files[-1].end
            if self.last_exit_ok and cp.existed and lo <= cp.clean_shutdown_offset <= hi:
                start = cp.clean_shutdown_offset
            elif cp.existed and lo <= (flushed := cp.min_flushed_offset if cfg.messageIndexSafe
                                       else cp.min_flushed_offset_without_index) <= hi:
                start = flushed
            else:
                start = lo
            stop = cl.scan(start, cfg.checkCRCOnRecover, redispatch)
            seg_start = start - start % cl.segment_size
            if stop.offset == start and stop.reason.startswith("invalid") and start != seg_start and seg_start >= lo:
                # the checkpoint does not point at a record boundary (restored or foreign files):
                # records always start at a segment start, so re-validate from there instead
                log.warning("checkpoint offset %d is not a record boundary (%s); re-scanning from %d",
                            start, stop.reason, seg_start)
                start = seg_start
                stop = cl.scan(start, cfg.checkCRCOnRecover, redispatch)
            end = stop.offset
            if not self.last_exit_ok or stop.reason not in ("end of data", "end of segments"):
                log.warning("commit log recovery: valid data ends at %d (%s); scanned from %d, "
                            "re-dispatched %d records", end, stop.reason, start, redispatched)
            # after a clean shutdown the writer stopped exactly there: nothing past it to zero
            cl.set_end(end, clean=self.last_exit_ok and end == cp.clean_shutdown_offset and stop.reason == "end of data")
        dropped = 0
        for cq in self._all_cqs():
            dropped += cq.truncate_beyond(end)
            cq.correct_min_offset(cl.min_offset)
        self.dispatcher.dispatched_offset = end
        self.recovery_report = {
            "clean": self.last_exit_ok,
            "scan_from": start,
            "end": end,
            "stop_reason": stop.reason if stop else "empty",
            "redispatched": redispatched,
            "cq_units_dropped": dropped,
            "seconds": time.monotonic() - t0,
        }
        if dropped:
            log.warning("recovery dropped %d consume-queue units beyond the commit log end %d", dropped, end)

    # ------------------------------------------------------------------------------------------
    # writing
    # ------------------------------------------------------------------------------------------

    @property
    def dispatched_offset(self) -> int:
        """The commit-log offset up to which every record is in the consume queues and the index."""
        return self.dispatcher.dispatched_offset

    @property
    def accepting(self) -> bool:
        """Whether puts are accepted now (running, disk not full, not a slave)."""
        return self.running and not self.disk_full and self.config.brokerRole != "SLAVE"

    def _refusal(self) -> PutMessageResult | None:
        if not self.running:
            return PutMessageResult(_P.SERVICE_NOT_AVAILABLE, remark="the message store is not running")
        if self.disk_full:
            return PutMessageResult(
                _P.SERVICE_NOT_AVAILABLE,
                remark=f"the disk holding {self.config.storePathCommitLog} is full (above "
                       f"diskSpaceWarningLevelRatio={self.config.diskSpaceWarningLevelRatio}%); "
                       f"writes resume when space is freed",
            )
        if self.config.brokerRole == "SLAVE":
            return PutMessageResult(_P.SERVICE_NOT_AVAILABLE, remark="this broker is a slave; send to the master")
        return None

    def _cq_for_write(self, topic: str, queue_id: int) -> ConsumeQueue:
        queues = self.cqs.get(topic)
        if queues is None:
            if not topic or "/" in topic or "\0" in topic or topic in (".", ".."):
                raise ValueError(f"topic {topic!r} cannot name a consume queue directory")
            queues = self.cqs[topic] = {}
        cq = queues.get(queue_id)
        if cq is None:
            cq = queues[queue_id] = ConsumeQueue(
                self.config.consume_queue_dir, topic, queue_id, self.config.mappedFileSizeConsumeQueue
            )
        return cq

    def put_message(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: dict[str, str] | str | None = None,
        *,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        tags_code: int | None = None,
        properties_str: str | None = None,
    ) -> PutMessageResult:
        """Append one message and dispatch it. Never waits for the disk: when ``result.needs_flush_wait``
        (SYNC_FLUSH and WAIT not "false"), answer the producer from :meth:`wait_flush`.

        ``properties`` is a dict or the encoded string. A caller holding both (the broker has the
        string from the request and parsed it for its checks) passes the dict as ``properties`` and the
        string as ``properties_str``: the record keeps the string verbatim and nothing is re-encoded.
        The record is encoded once, straight into the commit log's mapping.
        """
        if not self.accepting:
            return self._refusal()
        if properties_str is not None:
            pstr = properties_str
            props = properties if isinstance(properties, dict) else (decode_properties(pstr) if pstr else {})
        elif properties is None:
            props, pstr = {}, ""
        elif isinstance(properties, str):
            pstr = properties
            props = decode_properties(pstr) if pstr else {}
        else:
            props = properties
            pstr = encode_properties(props)
        try:
            parts = record_parts(topic, body, pstr, born_host, self.store_host, sys_flag)
        except ValueError as exc:
            status = _P.PROPERTIES_SIZE_EXCEEDED if "properties" in str(exc) else _P.MESSAGE_ILLEGAL
            return PutMessageResult(status, remark=str(exc))
        size = parts[0]
        if size > self._max_record:
            return PutMessageResult(
                _P.MESSAGE_ILLEGAL,
                remark=f"message record of {size} bytes exceeds maxMessageSize {self.config.maxMessageSize} "
                       f"or the commit log segment size",
            )
        now = int(time.time() * 1000)
        tx = sys_flag & 0xC
        placed = self._place(topic, queue_id, size, now, tx != _TX_PREPARED and tx != _TX_ROLLBACK)
        if placed.__class__ is PutMessageResult:
            return placed
        cq, qoff, phys = placed
        cl = self.commitlog
        record = bytearray(size)
        write_record(record, 0, parts, body, queue_id, flag, qoff, phys, born_timestamp, now,
                     reconsume_times, prepared_transaction_offset)
        try:
            end = cl.commit(phys, record, now)
        except OSError as exc:
            return self._write_failed(exc)
        units = b""
        if cq is not None:
            if tags_code is None:
                tags_code = (self.dispatcher.tags_code(topic, props, now) if topic == SCHEDULE_TOPIC
                             else compute_tags_code(props.get("TAGS")))
            units = UNIT.pack(phys, size, tags_code)
        items = b""
        if self._index_enabled and tx != _TX_ROLLBACK:
            keys = props.get("KEYS")
            uniq = props.get("UNIQ_KEY")
            if keys or uniq:
                items = key_items(topic, keys, uniq, phys)
        self._dispatch(cq, qoff, units, items, now, end)
        result = PutMessageResult(_P.PUT_OK, phys, size, qoff, f"{self._id_prefix}{phys:016X}", now, 1)
        if self._group_commit is not None and props.get("WAIT") != "false":
            result.needs_flush_wait = True
        return result

    def put_messages(
        self,
        topic: str,
        queue_id: int,
        entries: Iterable[BatchEntry | tuple],
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        reconsume_times: int = 0,
        wait_store_msg_ok: bool = True,
    ) -> PutMessageResult:
        """Append (flag, body, properties) entries as a batch (:meth:`put_batch`), each one's properties
        stored as given; a fourth item, the properties already encoded, is stored in their place."""
        body = encode_batch([(e[0], e[1], e[3] if len(e) > 3 and e[3] is not None else e[2]) for e in entries])
        result = self.put_batch(topic, queue_id, body, {}, sys_flag=sys_flag, born_timestamp=born_timestamp,
                                born_host=born_host, reconsume_times=reconsume_times)
        result.needs_flush_wait = result.needs_flush_wait and wait_store_msg_ok
        return result

    def put_batch(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        container: dict[str, str],
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        reconsume_times: int = 0,
    ) -> PutMessageResult:
        """Append a SEND_BATCH_MESSAGE body: each entry becomes its own record, with consecutive queue
        offsets, written contiguously in one segment, its properties the entry's own plus the
        ``container``'s it lacks (:mod:`wire.batch`). The result's ``uniq_keys`` are the entries'
        UNIQ_KEYs; whether to wait for the flush follows the first entry's WAIT."""
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        # One reservation covers the whole batch and the records are encoded straight into the mapping
        # with their final offsets; the consume-queue units go in as one run.
        now = int(time.time() * 1000)
        try:
            stamp = wire_batch.stamp(container)
            template, tail = record_template(topic, queue_id, sys_flag, born_timestamp, born_host, now,
                                             self.store_host, reconsume_times)
            count, total, wait = wire_batch.measure(body, stamp, len(template) + len(tail) + 2)
        except wire_batch.PropertiesTooLong as exc:
            return PutMessageResult(_P.PROPERTIES_SIZE_EXCEEDED, remark=str(exc))
        except RecordError as exc:
            return PutMessageResult(_P.MESSAGE_ILLEGAL, remark=f"the batch body cannot be decoded: {exc}")
        except ValueError as exc:
            return PutMessageResult(_P.MESSAGE_ILLEGAL, remark=str(exc))
        if not count:
            return PutMessageResult(_P.MESSAGE_ILLEGAL, remark="the batch holds no messages")
        if total > self.config.maxMessageSize or not self.commitlog.fits(total):
            return PutMessageResult(
                _P.MESSAGE_ILLEGAL,
                remark=f"batch of {total} bytes exceeds maxMessageSize {self.config.maxMessageSize} or the segment size",
            )
        placed = self._place(topic, queue_id, total, now, True)
        if placed.__class__ is PutMessageResult:
            return placed
        cq, first, first_phys = placed
        cl = self.commitlog
        records = bytearray(total)
        _written, units, items, ids, uniq_keys = wire_batch.write(
            records, 0, body, stamp, template, tail, first, first_phys,
            f"{topic}#".encode() if self._index_enabled else None, self._id_prefix)
        try:
            end = cl.commit(first_phys, records, now)
        except OSError as exc:
            return self._write_failed(exc)
        if topic == SCHEDULE_TOPIC:  # tag codes are delivery times there
            tags_code = self.dispatcher.tags_code
            units = b"".join(
                UNIT.pack(phys, size, tags_code(topic, decode_record(records, phys - first_phys)[0].properties, now))
                for phys, size, _tc in UNIT.iter_unpack(units))
        self._dispatch(cq, first, units, items, now, end)
        result = PutMessageResult(_P.PUT_OK, first_phys, total, first, ids, now, count)
        result.uniq_keys = uniq_keys
        result.needs_flush_wait = self._group_commit is not None and wait
        return result

    def _write_failed(self, exc: OSError) -> PutMessageResult:
        log.error("cannot write to the commit log (%s); the put is refused, nothing of it is stored", exc)
        return PutMessageResult(_P.UNKNOWN_ERROR, remark=f"cannot write to the commit log: {exc}")

    def _place(self, topic: str, queue_id: int, size: int, now: int,
               queued: bool) -> tuple[ConsumeQueue | None, int, int] | PutMessageResult:
        """Where a put of ``size`` bytes goes: its consume queue and queue offset (None and 0 when the
        record is not ``queued``: half and rollback records) and its commit-log offset; or the refusal."""
        if queued:
            queues = self.cqs.get(topic)
            cq = queues.get(queue_id) if queues else None
            if cq is None:
                try:
                    cq = self._cq_for_write(topic, queue_id)
                except ValueError as exc:
                    return PutMessageResult(_P.MESSAGE_ILLEGAL, remark=str(exc))
            qoff = cq.max_offset
        else:
            cq, qoff = None, 0
        try:
            return cq, qoff, self.commitlog.reserve(size, now)
        except (AllocationError, OSError) as exc:
            log.error("commit log segment allocation failed (%s); refusing writes until there is room for a "
                      "segment of %d bytes", exc, self.config.mappedFileSizeCommitLog)
            self.allocation_failed = True
            self.disk_full = True
            return PutMessageResult(_P.CREATE_MAPEDFILE_FAILED, remark=f"cannot create a commit log segment: {exc}")

    def wait_flush(self, result: PutMessageResult, callback: Callable[[PutMessageResult], None],
                   hop: Callable | None = None) -> None:
        """Call ``callback(result)`` once the record is on disk: status PUT_OK, or FLUSH_DISK_TIMEOUT
        if the fsync failed or came later than ``syncFlushTimeout``. Runs via ``hop`` (e.g.
        ``reactor.callFromThread``; by default the store's ``call_from_thread``), once per group commit
        for all the puts one fsync covered."""
        if not result.needs_flush_wait:
            callback(result)
            return
        deadline = time.monotonic() + self.config.syncFlushTimeout / 1000
        end = result.commitlog_offset + result.wrote_bytes

        def done(ok: bool) -> None:
            if not ok or time.monotonic() > deadline:
                result.status = _P.FLUSH_DISK_TIMEOUT
            result.needs_flush_wait = False
            callback(result)

        self._group_commit.submit(end, done, hop if hop is not None else self._call)

    def put_message_future(self, *args, **kwargs) -> "Future[PutMessageResult]":
        """:meth:`put_message` whose future resolves when the put's promise is met (after the fsync
        that covers it for SYNC_FLUSH)."""
        fut: Future = Future()
        result = self.put_message(*args, **kwargs)
        self.wait_flush(result, fut.set_result)
        return fut

    # --- replication (server/ha) ---
    def get_commitlog_data(self, offset: int, max_bytes: int = 32 * 1024) -> memoryview | None:
        """Master side: raw commit-log bytes from ``offset`` (within one segment), None if none yet."""
        return self.commitlog.read_data(offset, max_bytes)

    def append_to_commitlog(self, offset: int, data, dispatch: bool = True) -> None:
        """Slave side: append bytes received from the master at ``offset`` and dispatch every record they
        complete (consume queues, index, arriving listeners). Raises ValueError on a gap.
        ``dispatch=False`` leaves the dispatch to :meth:`dispatch_appended` (a slave acknowledges what
        its commit log holds before it indexes it, as Apache's does)."""
        cl = self.commitlog
        if not cl.queue.files:
            self.dispatcher.dispatched_offset = offset
        cl.append_data(offset, data)
        if dispatch:
            self.dispatch_appended()

    def dispatch_appended(self) -> None:
        """Dispatch the records appended by :meth:`append_to_commitlog` and not dispatched yet."""
        cl = self.commitlog
        dispatcher = self.dispatcher
        stop = cl.scan(dispatcher.dispatched_offset, False, dispatcher.dispatch_record, limit=cl.max_offset)
        dispatcher.dispatched_offset = stop.offset
        if stop.reason not in ("incomplete", "end of data", "end of segments"):
            log.error("replicated commit log has an invalid record at %d: %s", stop.offset, stop.reason)

    def truncate_to(self, offset: int) -> None:
        """Drop everything from commit-log offset ``offset`` on (a record boundary), with the consume-queue
        units that point there (HA: a slave cutting back to what its new master has)."""
        if offset >= self.commitlog.max_offset:
            return
        self.commitlog.set_end(offset)
        for cq in self._all_cqs():
            cq.truncate_beyond(offset)
        self.dispatcher.dispatched_offset = min(self.dispatcher.dispatched_offset, offset)

    def add_arriving_listener(self, listener: ArrivingListener) -> None:
        """``listener(topic, queue_id, max_offset, tags_code, store_timestamp)`` after each
        dispatched message (Apache MessageArrivingListener); runs on the writer thread. A batch is
        told once, with the queue's new max offset and the tag code its messages share (None when
        they differ: a listener then treats the batch as matching any filter)."""
        self.dispatcher.listeners.append(listener)

    def remove_arriving_listener(self, listener: ArrivingListener) -> None:
        """Stop telling ``listener`` (a master that steps down); absent is fine. The list is replaced,
        not edited, as the writer thread may be walking it."""
        self.dispatcher.listeners = [known for known in self.dispatcher.listeners if known != listener]

    # ------------------------------------------------------------------------------------------
    # reading
    # ------------------------------------------------------------------------------------------

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        queues = self.cqs.get(topic)
        return queues.get(queue_id) if queues else None

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int = MAX_PULL_MSG_SIZE,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Read up to ``max_msg_nums`` records from ``offset`` (PULL_MESSAGE semantics, store.md §4)."""
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return GetMessageResult(_G.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_off, max_off = cq.min_offset, cq.max_offset
        if max_off == 0:
            return GetMessageResult(_G.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
        if offset < min_off:
            return GetMessageResult(_G.OFFSET_TOO_SMALL, min_off, min_off, max_off)
        if offset == max_off:
            return GetMessageResult(_G.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
        if offset > max_off:
            return GetMessageResult(_G.OFFSET_OVERFLOW_BADLY, max_off, min_off, max_off)

        cfg = self.config
        result = GetMessageResult(_G.NO_MATCHED_MESSAGE, offset, min_off, max_off)
        units, n = cq.units_from(offset)
        if units is None:
            result.status = _G.OFFSET_FOUND_NULL
            result.next_begin_offset = cq.roll_next_file(offset)
            return result
        cl = self.commitlog
        max_phy = cl.max_offset
        min_phy = cl.min_offset
        max_pull = min(max(max_total_bytes, 100), MAX_PULL_MSG_SIZE)
        limit_units = max(cfg.maxFilterMessageSize, max_msg_nums * UNIT_SIZE) // UNIT_SIZE
        mem_limit = self._memory_limit
        # per-record work stays in locals: this loop runs for every message every consumer pulls
        mem_bytes, mem_count = cfg.maxTransferBytesOnMessageInMemory, cfg.maxTransferCountOnMessageInMemory
        disk_bytes, disk_count = cfg.maxTransferBytesOnMessageInDisk, cfg.maxTransferCountOnMessageInDisk
        cq_match = cl_match = None
        if message_filter is not None:
            cq_match, cl_match = message_filter.is_matched_by_consume_queue, message_filter.is_matched_by_commit_log
        spans = result.spans
        add_qoff = result.queue_offsets.append
        total = 0
        count = 0
        next_begin = offset
        max_phy_pulling = 0
        skip_below = -1
        seg_view, seg_lo, seg_hi = None, 0, -1  # the commit-log segment last looked up: [seg_lo, seg_hi) readable
        # The open span: records found back to back in the commit log (a batch, or one producer's run) go out
        # as one view. ``run`` is sliced from the segment as the span opens, so it stays valid even if
        # retention releases the segment's own view meanwhile.
        run, run_start, run_end = None, 0, -1
        unpack = UNIT.unpack_from
        n = min(n, max_off - offset, limit_units)
        for i in range(n):
            phys, size, tags = unpack(units, i * UNIT_SIZE)
            if count:
                if count >= max_msg_nums or total + size > max_pull:
                    break
                if max_phy - phys <= mem_limit:
                    if total + size > mem_bytes or count >= mem_count:
                        break
                elif total + size > disk_bytes or count >= disk_count:
                    break
            max_phy_pulling = phys
            next_begin = offset + i + 1
            if size == PAD_SIZE:
                continue
            if phys < min_phy or phys < skip_below:
                if not count:
                    result.status = _G.MESSAGE_WAS_REMOVING
                continue
            if cq_match is not None and not cq_match(tags):
                continue
            if phys != run_end or phys + size > seg_hi:
                if phys < seg_lo or phys + size > seg_hi:
                    seg = cl.segment_of(phys)
                    seg_view, seg_lo, seg_hi = seg if seg is not None else (None, 0, -1)
                opened = None
                if phys + size <= seg_hi:
                    try:
                        opened = seg_view[phys - seg_lo : seg_hi - seg_lo]
                    except ValueError:  # the segment was deleted by retention meanwhile
                        seg_view, seg_lo, seg_hi = None, 0, -1
                if opened is None:
                    if not count:
                        result.status = _G.MESSAGE_WAS_REMOVING
                    skip_below = cl.roll_next_file(phys)
                    continue
                if cl_match is not None and not cl_match(opened[:size]):
                    continue
                if run is not None:
                    spans.append(run[: run_end - run_start])
                run, run_start = opened, phys
            elif cl_match is not None and not cl_match(run[phys - run_start : phys - run_start + size]):
                continue
            run_end = phys + size
            add_qoff(offset + i)
            total += size
            count += 1
        if run is not None:
            spans.append(run[: run_end - run_start])
        if count:
            result.status = _G.FOUND
        result.message_count = count
        result.next_begin_offset = next_begin
        result.buffer_total_size = total
        result.suggest_pulling_from_slave = max_phy - max_phy_pulling > mem_limit
        return result

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        return cq.max_offset if cq else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        return cq.min_offset if cq else 0

    def get_queue_unit(self, topic: str, queue_id: int, offset: int) -> tuple[int, int, int] | None:
        """(commit-log offset, size, tags code) of a consume-queue unit; for SCHEDULE_TOPIC_XXXX the tags
        code is the delivery time (ms). None past the end or for padding."""
        cq = self.find_consume_queue(topic, queue_id)
        u = cq.get_unit(offset) if cq else None
        return None if u is None or u[1] == PAD_SIZE else u

    def get_commitlog_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        u = cq.get_unit(offset) if cq else None
        return u[0] if u else 0

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store timestamp of the message at ``offset`` (Apache getMessageStoreTimeStamp), -1 if none."""
        cq = self.find_consume_queue(topic, queue_id)
        u = cq.get_unit(offset) if cq else None
        if u is None or u[1] == PAD_SIZE:
            return -1
        return self.commitlog.store_timestamp(u[0], u[1])

    def get_earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store timestamp of the oldest message still in the queue (GET_EARLIEST_MSG_STORETIME), -1 if none."""
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None or cq.max_offset <= cq.min_offset:
            return -1
        return self.get_store_time(topic, queue_id, cq.min_offset)

    def get_earliest_message_time(self) -> int:
        """Store timestamp of the first record in the commit log, -1 if empty."""
        files = self.commitlog.queue.files
        if not files or self.commitlog.max_offset <= files[0].start:
            return -1
        try:
            return peek_record(files[0].mm, 0).store_timestamp
        except Exception:
            return -1

    def search_offset_by_time(self, topic: str, queue_id: int, timestamp: int, boundary: str = "LOWER") -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP. LOWER: first offset stored at/after ``timestamp`` (max offset if
        none); UPPER: last offset stored at/before it."""
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        return cq.search_offset_by_time(timestamp, self.commitlog.store_timestamp, self.commitlog.min_offset,
                                        lower=boundary.upper() != "UPPER")

    def get_max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    def get_min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    def get_flushed_phy_offset(self) -> int:
        return self.commitlog.flushed_offset

    def iter_queue(self, topic: str, queue_id: int, start: int, end: int) -> Iterator[tuple[int, int, memoryview | None]]:
        """(queue offset, tags code, record view or None if the commit log no longer has it) for each
        unit of one queue in ``[start, end)``, skipping the gap a rolled segment leaves. The services
        that walk a system queue (delay levels, the timer wheel, half and op messages) read it this way."""
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return
        offset = start
        while offset < end:
            unit = cq.get_unit(offset)
            if unit is None:
                offset = cq.roll_next_file(offset)
                continue
            phys, size, tags_code = unit
            yield offset, tags_code, None if size == PAD_SIZE else self.commitlog.read(phys, size)
            offset += 1

    def select_one_message_by_offset(self, phys: int, size: int | None = None) -> memoryview | None:
        """The raw record at commit-log offset ``phys`` (VIEW_MESSAGE_BY_ID), or None."""
        if size is None:
            return self.commitlog.read_record(phys)
        return self.commitlog.read(phys, size)

    def look_message_by_offset(self, phys: int) -> MessageExt | None:
        """The decoded record at ``phys`` (for transaction checks, admin), or None."""
        view = self.commitlog.read_record(phys)
        if view is None:
            return None
        return decode_record(view)[0]

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Records of ``topic`` whose KEYS contain ``key`` or whose UNIQ_KEY is ``key``, stored in
        [begin, end] ms: the newest ``max_num`` (capped by defaultQueryMaxNum), in commit-log order as
        Apache answers them."""
        max_num = min(max_num, self.config.defaultQueryMaxNum) if max_num > 0 else self.config.defaultQueryMaxNum
        # ask the index for more than max_num: hash collisions and duplicates are filtered below
        offsets, last_ts, last_phy = self.index.query(topic, key, max_num * 4 + 16, begin, end)
        result = QueryMessageResult(index_last_update_timestamp=last_ts, index_last_update_phyoffset=last_phy)
        seen = set()
        for phys in offsets:
            if phys in seen:
                continue
            seen.add(phys)
            view = self.commitlog.read_record(phys)
            if view is None:
                continue
            try:
                info = peek_record(view)
            except Exception:
                continue
            if info.topic != topic or not (begin <= info.store_timestamp <= end):
                continue
            props = decode_properties(info.properties)
            if props.get(MessageConst.UNIQ_KEY) != key and key not in props.get(MessageConst.KEYS, "").split(" "):
                continue
            result.messages.append(view)
            result.commitlog_offsets.append(phys)
            if len(result.messages) >= max_num:
                break
        if result.commitlog_offsets:
            found = sorted(zip(result.commitlog_offsets, result.messages), key=lambda pair: pair[0])
            result.commitlog_offsets = [phys for phys, _ in found]
            result.messages = [view for _, view in found]
        return result

    # ------------------------------------------------------------------------------------------
    # topics and admin
    # ------------------------------------------------------------------------------------------

    def _all_cqs(self) -> list[ConsumeQueue]:
        return [cq for queues in list(self.cqs.values()) for cq in list(queues.values())]

    def topic_queue_table(self) -> dict[tuple[str, int], int]:
        """(topic, queue id) -> max offset for every consume queue."""
        return {(cq.topic, cq.queue_id): cq.max_offset for cq in self._all_cqs()}

    def delete_topics(self, topics: Iterable[str]) -> int:
        """Remove the consume queues of ``topics`` (admin deleteTopic); commit-log data ages out normally."""
        n = 0
        for topic in topics:
            queues = self.cqs.pop(topic, None)
            if queues:
                for cq in queues.values():
                    cq.destroy()
                n += 1
        return n

    def runtime_info(self) -> dict[str, str]:
        """Store figures for GET_BROKER_RUNTIME_INFO (Apache key names)."""
        cl = self.commitlog
        try:
            ratio = self.disk_usage(self.config.storePathCommitLog)
        except OSError:
            ratio = -1.0
        return {
            "commitLogMinOffset": str(cl.min_offset),
            "commitLogMaxOffset": str(cl.max_offset),
            "commitLogDiskRatio": str(ratio),
            "dispatchBehindBytes": str(cl.max_offset - self.dispatched_offset),
            "earliestMessageTimeStamp": str(self.get_earliest_message_time()),
            "putMessageEntireTimeMax": "0",
            "msgPutTotalTodayNow": "0",
        }

    def clean_expired_files_manually(self) -> None:
        """TRIGGER_DELETE_FILES: run the retention check now, ignoring deleteWhen."""
        self.cleaner.manual_requests += 1

    # ------------------------------------------------------------------------------------------
    # background tasks
    # ------------------------------------------------------------------------------------------

    #: how far ahead of the write position commit-log pages are faulted in
    PREFAULT_AHEAD = 32 << 20

    def _prefault_task(self) -> None:
        """Write pages ahead of the commit-log writer (``warmMapedFileEnable``, see :mod:`.mapped_file`), then
        tell the commit log how far the writer may go before this has work again: the next step to
        prepare, the sixteenth of the segment that starts the next one's zeros, or the segment's end (the
        first commit in the next segment). At least :data:`~.mapped_file.PREPARE_STEP` further (within the
        segment), so a step that fails does not wake the thread on every commit."""
        cl = self.commitlog
        mf = cl.tail
        if mf is None:
            cl.ahead_due = 0  # the first commit after a load or truncation
            return
        mf.populate(mf.wrote + self.PREFAULT_AHEAD)
        due = mf.populate_due()
        fill_at = mf.size >> 4
        if mf.wrote >= fill_at:
            cl.queue.fill_next()  # once per segment: the allocator ignores repeats
        else:
            due = min(due, fill_at)
        cl.ahead_due = mf.start + min(max(due, mf.wrote + PREPARE_STEP), mf.size)

    def _flush_commitlog_task(self) -> None:
        cl = self.commitlog
        flushed = cl.flush()
        cl.queue.release_flushed_pages(keep_tail=8 << 20)
        cp = self.checkpoint
        if flushed != cp.physic_flushed_offset:
            cp.physic_flushed_offset = flushed
            cp.physic_msg_timestamp = int(time.time() * 1000)

    def _flush_logics_task(self) -> None:
        dispatched = self.dispatched_offset  # read before flushing: everything up to it is in the CQs
        for cq in self._all_cqs():
            try:
                cq.flush()
                cq.queue.release_flushed_pages()
            except (OSError, ValueError):
                pass  # a queue deleted meanwhile
        cp = self.checkpoint
        now = int(time.time() * 1000)
        if self.config.messageIndexSafe:
            self.index.flush()
            cp.index_flushed_offset, cp.index_msg_timestamp = dispatched, now
        else:
            # only full files are fsynced (once); the file being written is left to the kernel's
            # write-back: fsyncing it each second rewrote thousands of hash-slot pages a second
            self.index.flush(active=False)
        cp.logics_flushed_offset, cp.logics_msg_timestamp = dispatched, now
        cp.flush()
