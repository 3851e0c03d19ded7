"""Apache 5.x controller mode: a broker takes the brokerId and the role Apache's controller assigns
(docs/ha.md, "Controller mode")."""
