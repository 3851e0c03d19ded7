// Command mqttload drives an MQTT broker for benchmarks/mqtt_bench.py, with the Eclipse Paho Go client
// (MQTT 3.1.1).
//
//	mqttload pubsub -broker tcp://HOST:PORT -topic T -qos 1 -publishers 4 -subscribers 1 -window 16 ...
//	mqttload idle -broker tcp://HOST:PORT -clients 10000 -keepalive 30 -subscribe T -hold 35s
//
// pubsub: every subscriber subscribes to T/+ and each publisher i publishes size-byte messages to T/p{i},
// at most -window of them on the way at once: a publisher sends its next message when the first
// subscriber has received one of its earlier ones (a closed loop end to end, the same at QoS 0 and 1, so
// neither broker is flooded past what it delivers). A message carries its publisher, sequence number and
// send time; the subscribers take the end-to-end latency from it. The counts and latencies of the
// -duration after -warmup are printed as one line `RESULT {json}`, with "lost": the times a publisher
// gave up waiting for one of its messages (see giveUp). With -pause D a publisher waits a random time,
// uniform between 0 and 2D, after each PUBLISH: about 1/D messages a second each, the same offered load on
// any broker that keeps up, so the latency is what the broker adds rather than the queue of a saturated
// closed loop (where the mean latency is the window over the rate).
//
// idle: -clients connections CONNECT with the keep-alive given (Paho sends the PINGREQs), at most
// -concurrency connecting at once, and with -subscribe T each subscribes to T/c{i} at QoS 1 (a device's
// own command topic); once all are up the tool prints `READY {json}`, holds them for -hold, counts the
// connections lost meanwhile, disconnects and prints `RESULT {json}`.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

const header = 16 // publisher (4 bytes), sequence (4), send time in ns (8)

// giveUp is how long a publisher with its whole window on the way waits before it counts one message
// as lost and sends the next: long next to any latency measured, short enough that a lost message
// does not hold a publisher for a large part of a run.
const giveUp = 2 * time.Second

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mqttload pubsub|idle [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "pubsub":
		err = pubsub(os.Args[2:])
	case "idle":
		err = idle(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mqttload:", err)
		os.Exit(1)
	}
}

func options(broker, id string, keepAlive time.Duration) *mqtt.ClientOptions {
	return mqtt.NewClientOptions().AddBroker(broker).SetClientID(id).SetProtocolVersion(4).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
		SetKeepAlive(keepAlive).SetPingTimeout(10 * time.Second).SetConnectTimeout(30 * time.Second).
		SetWriteTimeout(30 * time.Second)
}

func connect(opts *mqtt.ClientOptions) (mqtt.Client, error) {
	c := mqtt.NewClient(opts)
	t := c.Connect()
	if !t.WaitTimeout(60 * time.Second) {
		return nil, fmt.Errorf("CONNECT of %s not answered in 60 s", opts.ClientID)
	}
	return c, t.Error()
}

func emit(tag string, v any) {
	b, _ := json.Marshal(v)
	fmt.Printf("%s %s\n", tag, b)
}

// percentile of sorted latencies in ns, as ms
func percentile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return float64(sorted[i]) / 1e6
}

type subscriber struct {
	client    mqtt.Client
	received  atomic.Int64 // within the measured window
	latencies []int64      // within the measured window, appended by Paho's one router goroutine
	sentAt    []int64      // each latency's send time (ns since the epoch), kept for -timeline
}

func pubsub(args []string) error {
	fs := flag.NewFlagSet("pubsub", flag.ExitOnError)
	broker := fs.String("broker", "tcp://127.0.0.1:1883", "broker URL")
	topic := fs.String("topic", "bench/run", "topic prefix: publishers send to {topic}/p{i}, subscribers take {topic}/+")
	qos := fs.Int("qos", 1, "QoS of the publishes and the subscriptions")
	publishers := fs.Int("publishers", 4, "publishing connections")
	subscribers := fs.Int("subscribers", 1, "subscribing connections (each receives every message)")
	window := fs.Int("window", 16, "messages of one publisher on the way (sent, not yet received) at once")
	size := fs.Int("size", 1024, "payload bytes")
	warmup := fs.Duration("warmup", 3*time.Second, "unmeasured time first")
	duration := fs.Duration("duration", 10*time.Second, "measured time")
	pause := fs.Duration("pause", 0, "mean pause after each PUBLISH (uniform between 0 and twice this); 0: none")
	timeline := fs.String("timeline", "", "write each measured message's send time and latency (ns, one pair a line) to this file")
	fs.Parse(args)
	if *size < header {
		return fmt.Errorf("size must be at least %d", header)
	}

	var measuring atomic.Bool
	tokens := make([]chan struct{}, *publishers)
	for i := range tokens {
		tokens[i] = make(chan struct{}, *window)
		for j := 0; j < *window; j++ {
			tokens[i] <- struct{}{}
		}
	}
	subs := make([]*subscriber, *subscribers)
	for s := range subs {
		sub := &subscriber{}
		subs[s] = sub
		first := s == 0
		c, err := connect(options(*broker, fmt.Sprintf("mqttload-sub-%d-%d", os.Getpid(), s), 30*time.Second))
		if err != nil {
			return err
		}
		sub.client = c
		handler := func(_ mqtt.Client, m mqtt.Message) {
			now := time.Now().UnixNano()
			p := m.Payload()
			if len(p) < header {
				return
			}
			pub := binary.BigEndian.Uint32(p[0:4])
			if measuring.Load() {
				sub.received.Add(1)
				at := int64(binary.BigEndian.Uint64(p[8:16]))
				sub.latencies = append(sub.latencies, now-at)
				if *timeline != "" {
					sub.sentAt = append(sub.sentAt, at)
				}
			}
			if first && int(pub) < len(tokens) {
				select {
				case tokens[pub] <- struct{}{}:
				default: // a slot given up on as lost came back late
				}
			}
		}
		t := c.Subscribe(*topic+"/+", byte(*qos), handler)
		if !t.WaitTimeout(30*time.Second) || t.Error() != nil {
			return fmt.Errorf("SUBSCRIBE: %v", t.Error())
		}
	}

	var sent, lost, failed atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	pubs := make([]mqtt.Client, *publishers)
	for i := range pubs {
		c, err := connect(options(*broker, fmt.Sprintf("mqttload-pub-%d-%d", os.Getpid(), i), 30*time.Second))
		if err != nil {
			return err
		}
		pubs[i] = c
	}
	for i, c := range pubs {
		wg.Add(1)
		go func(i int, c mqtt.Client) {
			defer wg.Done()
			name := fmt.Sprintf("%s/p%d", *topic, i)
			payload := make([]byte, *size)
			for j := header; j < len(payload); j++ {
				payload[j] = 'm'
			}
			for seq := uint32(0); !stop.Load(); seq++ {
				select {
				case <-tokens[i]:
				case <-time.After(giveUp):
					lost.Add(1) // a message not received in time: its slot is given up on
				}
				body := make([]byte, len(payload))
				copy(body, payload)
				binary.BigEndian.PutUint32(body[0:4], uint32(i))
				binary.BigEndian.PutUint32(body[4:8], seq)
				binary.BigEndian.PutUint64(body[8:16], uint64(time.Now().UnixNano()))
				t := c.Publish(name, byte(*qos), false, body)
				if measuring.Load() {
					sent.Add(1)
				}
				if *qos > 0 {
					go func() {
						if !t.WaitTimeout(30*time.Second) || t.Error() != nil {
							failed.Add(1)
						}
					}()
				}
				if *pause > 0 {
					time.Sleep(time.Duration(rand.Int63n(int64(2 * *pause))))
				}
			}
		}(i, c)
	}

	time.Sleep(*warmup)
	measuring.Store(true)
	started := time.Now()
	time.Sleep(*duration)
	measuring.Store(false)
	seconds := time.Since(started).Seconds()
	stop.Store(true)
	wg.Wait()

	var received int64
	var all []int64
	for _, s := range subs {
		received += s.received.Load()
	}
	time.Sleep(500 * time.Millisecond) // the routers' last appends, before the slices are read
	for _, s := range subs {
		all = append(all, s.latencies...)
	}
	if *timeline != "" {
		if err := writeTimeline(*timeline, subs); err != nil {
			return err
		}
	}
	for _, c := range pubs {
		c.Disconnect(200)
	}
	for _, s := range subs {
		s.client.Disconnect(200)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	var sum float64
	for _, l := range all {
		sum += float64(l)
	}
	mean := 0.0
	if len(all) > 0 {
		mean = sum / float64(len(all)) / 1e6
	}
	emit("RESULT", map[string]any{
		"qos": *qos, "pause_ms": float64(*pause) / 1e6, "publishers": *publishers, "subscribers": *subscribers, "window": *window, "size": *size,
		"seconds": seconds, "sent": sent.Load(), "received": received, "rate": float64(received) / seconds,
		"lost": lost.Load(), "failed": failed.Load(), "mean_ms": mean,
		"p50_ms": percentile(all, 0.50), "p90_ms": percentile(all, 0.90), "p99_ms": percentile(all, 0.99),
		"max_ms": percentile(all, 1.0),
	})
	return nil
}

func idle(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	broker := fs.String("broker", "tcp://127.0.0.1:1883", "broker URL")
	clients := fs.Int("clients", 10000, "connections")
	keepAlive := fs.Int("keepalive", 30, "keep-alive seconds")
	concurrency := fs.Int("concurrency", 64, "connections being made at once")
	hold := fs.Duration("hold", 35*time.Second, "time the connections are held once all are up")
	subscribe := fs.String("subscribe", "", "topic prefix: client i subscribes to {prefix}/c{i} (none if empty)")
	fs.Parse(args)

	var lost atomic.Int64
	conns := make([]mqtt.Client, *clients)
	errs := make(chan error, *clients)
	slots := make(chan struct{}, *concurrency)
	var wg sync.WaitGroup
	started := time.Now()
	for i := range conns {
		wg.Add(1)
		slots <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-slots }()
			opts := options(*broker, fmt.Sprintf("mqttload-idle-%d-%d", os.Getpid(), i), time.Duration(*keepAlive)*time.Second)
			opts.SetConnectionLostHandler(func(mqtt.Client, error) { lost.Add(1) })
			c, err := connect(opts)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
			if *subscribe != "" {
				t := c.Subscribe(fmt.Sprintf("%s/c%d", *subscribe, i), 1, func(mqtt.Client, mqtt.Message) {})
				if !t.WaitTimeout(60*time.Second) || t.Error() != nil {
					errs <- fmt.Errorf("SUBSCRIBE of client %d: %v", i, t.Error())
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	failed := len(errs)
	if failed > 0 {
		fmt.Fprintln(os.Stderr, "first failure:", <-errs)
	}
	connectSeconds := time.Since(started).Seconds()
	emit("READY", map[string]any{"clients": *clients, "failed": failed, "connect_seconds": connectSeconds})
	time.Sleep(*hold)
	lostDuringHold := lost.Load()
	for _, c := range conns {
		if c != nil {
			c.Disconnect(0)
		}
	}
	emit("RESULT", map[string]any{"clients": *clients, "failed": failed, "connect_seconds": connectSeconds,
		"lost": lostDuringHold, "keepalive_s": *keepAlive, "hold_s": hold.Seconds(), "subscribed": *subscribe != ""})
	return nil
}

// writeTimeline writes "send_ns latency_ns" lines: whether the slow messages cluster at periodic instants
func writeTimeline(path string, subs []*subscriber) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, s := range subs {
		for i, at := range s.sentAt {
			fmt.Fprintf(w, "%d %d\n", at, s.latencies[i])
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
