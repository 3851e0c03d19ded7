// Command goharness drives the official RocketMQ Go client (github.com/apache/rocketmq-client-go/v2)
// for FerryMQ's compatibility tests. Each subcommand prints JSON lines on stdout (one object per
// event, the last one {"event":"done",...}) and logs from the client go to stderr, so that pytest can
// parse the results and show the logs when a scenario fails.
//
//	goharness route   -n ADDR -t TOPIC
//	goharness send    -n ADDR -t TOPIC [-count N] [-tag T] [-keys K] [-body TEXT] [-group G]
//	                  [-mode sync|async|oneway|batch] [-interval 20ms (sync: pause between sends)]
//	goharness consume -n ADDR -t TOPIC -g GROUP [-count N] [-expr "*"] [-timeout 30s] [-from first|last]
//	                  [-model clustering|broadcasting] [-orderly]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
)

type command struct {
	summary string
	run     func(args []string) error
}

var commands = map[string]command{
	"route":   {"fetch a topic route from the name server through the Go client", runRoute},
	"send":    {"send messages synchronously with a DefaultProducer", runSend},
	"pull":    {"pull messages with the pull consumer (Pull) until -count arrive or -timeout passes", runPull},
	"txn":     {"send transactional messages; the listener answers per message property txmode", runTxn},
	"consume": {"consume messages with a push consumer until -count arrive or -timeout passes", runConsume},
}

// emit writes one JSON object per line on stdout: the machine-readable channel to pytest.
func emit(v map[string]any) {
	line, err := json.Marshal(v)
	if err != nil {
		line, _ = json.Marshal(map[string]any{"event": "error", "error": err.Error()})
	}
	fmt.Println(string(line))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: goharness <subcommand> [flags]; subcommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", name, commands[name].summary)
	}
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	return fs
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown subcommand %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	quietClientLogs()
	if err := cmd.run(os.Args[2:]); err != nil {
		emit(map[string]any{"event": "error", "error": err.Error()})
		os.Exit(1)
	}
}
