"""Scheduled delivery: delay levels (SCHEDULE_TOPIC_XXXX) and, later, the timer wheel."""
