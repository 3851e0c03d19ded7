package main

import (
	"os"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// quietClientLogs sends the client's logrus output to stderr at the level in GOHARNESS_LOG_LEVEL
// (default "warn"): stdout is reserved for the JSON lines.
func quietClientLogs() {
	level := os.Getenv("GOHARNESS_LOG_LEVEL")
	if level == "" {
		level = "warn"
	}
	rlog.SetLogLevel(level)
}
