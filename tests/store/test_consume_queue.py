"""Consume queue units, segment roll-over, recovery of the written end, truncation, padding."""

from __future__ import annotations

from ferrymq.server.store.consume_queue import PAD_SIZE, UNIT, UNIT_SIZE, ConsumeQueue


def make(tmp_path, units_per_file=10):
    return ConsumeQueue(str(tmp_path / "cq"), "T", 0, units_per_file * UNIT_SIZE)


def test_units_roll_over_segments(tmp_path):
    cq = make(tmp_path)
    for i in range(25):
        cq.append(i, UNIT.pack(i * 1000, 100 + i, i - 5))
    assert cq.max_offset == 25 and cq.min_offset == 0
    assert [mf.start for mf in cq.queue.files] == [0, 200, 400]
    assert cq.get_unit(13) == (13000, 113, 8)
    assert cq.get_unit(3) == (3000, 103, -2)  # tags code sign-extended
    units, n = cq.units_from(7)
    assert n == 3 and UNIT.unpack_from(units, 0) == (7000, 107, 2)  # only to the end of the segment
    assert cq.roll_next_file(7) == 10
    assert cq.get_unit(25) is None


def test_recover_finds_end_and_drops_torn_unit(tmp_path):
    cq = make(tmp_path)
    for i in range(13):
        cq.append(i, UNIT.pack(i * 10, 10, 0))
    last = cq.queue.files[-1]
    last.mm[last.wrote : last.wrote + 8] = (999).to_bytes(8, "big")  # half a unit: size still zero
    cq.queue.close()
    again = make(tmp_path)
    again.load()
    again.recover()
    assert again.max_offset == 13 and again.get_unit(12) == (120, 10, 0)
    assert bytes(again.queue.files[-1].mm[60:80]) == bytes(20)
    again.append(13, UNIT.pack(130, 10, 0))
    assert again.max_offset == 14


def test_truncate_beyond(tmp_path):
    cq = make(tmp_path)
    for i in range(15):
        cq.append(i, UNIT.pack(i * 10, 10, 0))
    assert cq.truncate_beyond(95) == 6  # records at 90.. end past 95
    assert cq.max_offset == 9
    cq.append(9, UNIT.pack(90, 5, 0))
    assert cq.get_unit(9) == (90, 5, 0)


def test_fresh_queue_starting_late_is_padded(tmp_path):
    cq = make(tmp_path)
    cq.append(23, UNIT.pack(5000, 50, 0))
    assert cq.max_offset == 24 and cq.min_offset == 23
    assert cq.get_unit(21) == (0, PAD_SIZE, 0)
    assert [mf.start for mf in cq.queue.files] == [400]


def test_correct_min_offset(tmp_path):
    cq = make(tmp_path)
    for i in range(20):
        cq.append(i, UNIT.pack(i * 10, 10, 0))
    cq.correct_min_offset(75)
    assert cq.min_offset == 8
    assert cq.delete_expired_files(105) == 1 and cq.queue.files[0].start == 200


def units(*triples) -> bytes:
    return b"".join(UNIT.pack(*t) for t in triples)


def test_a_run_of_units_goes_in_across_a_segment_end(tmp_path):
    cq = make(tmp_path)
    cq.append(0, units(*((i * 10, 10, 1) for i in range(8))))
    assert [mf.wrote for mf in cq.queue.files] == [160]
    cq.append(8, units(*((i * 10, 10, 2) for i in range(8, 13))))  # 2 units fit, 3 go to the next segment
    assert cq.max_offset == 13 and [mf.start for mf in cq.queue.files] == [0, 200]
    assert [cq.get_unit(i) for i in (7, 8, 9, 10, 12)] == [(70, 10, 1), (80, 10, 2), (90, 10, 2), (100, 10, 2),
                                                           (120, 10, 2)]
    cq.append(13, units((130, 10, 3)))
    assert cq.get_unit(13) == (130, 10, 3) and cq.max_offset == 14


def test_appending_units_the_queue_holds_rewrites_them_above_its_minimum(tmp_path):
    cq = make(tmp_path)
    cq.append(0, units(*((i * 10, 10, 0) for i in range(15))))
    cq.correct_min_offset(45)  # units 0..4 point at deleted records
    assert cq.min_offset == 5
    cq.append(3, units((30, 10, 7), (40, 10, 7), (50, 10, 7), (60, 10, 7)))  # recovery re-dispatching
    assert [cq.get_unit(i) for i in range(3, 8)] == [(30, 10, 0), (40, 10, 0), (50, 10, 7), (60, 10, 7), (70, 10, 0)]
    assert cq.max_offset == 15
