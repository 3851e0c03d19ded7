package main

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// runConsume starts a clustering push consumer, prints every message it receives, and stops after
// -count messages or -timeout, whichever comes first (exit status 1 when fewer than -count arrived).
func runConsume(args []string) error {
	fs := newFlags("consume")
	namesrv := fs.String("n", "", "name server address host:port")
	topic := fs.String("t", "", "topic")
	group := fs.String("g", "goharness_consumer", "consumer group")
	expr := fs.String("expr", "*", "tag expression")
	count := fs.Int("count", 1, "stop after this many messages")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	from := fs.String("from", "first", "where a new group starts: first or last")
	model := fs.String("model", "clustering", "clustering or broadcasting")
	orderly := fs.Bool("orderly", false, "consume orderly (queue locks, one message at a time per queue)")
	sql := fs.String("sql", "", "SQL92 expression (replaces -expr)")
	linger := fs.Duration("linger", 0, "keep consuming this long after -count arrived (to catch messages that should not come)")
	idle := fs.Duration("idle", 0, "leave once no message came for this long (after the first), instead of at -count")
	reconsume := fs.Int("reconsume", 0, "answer ConsumeRetryLater while a message was re-consumed fewer times than this")
	maxReconsume := fs.Int("maxReconsume", -1, "consumer maxReconsumeTimes (-1: client default)")
	instance := fs.String("instance", "", "client instance name")
	rebalance := fs.Duration("rebalance", 0, "also refresh routes and rebalance this often (v2.1.2 polls routes every 30 s and rebalances every 20 s, constants: a retry topic created after the start is pulled only after both, a queue dropped for an illegal offset is taken up again only at the next rebalance)")
	fs.Parse(args)
	if *namesrv == "" || *topic == "" {
		return fmt.Errorf("consume needs -n NAMESRV and -t TOPIC")
	}
	where := consumer.ConsumeFromFirstOffset
	if *from == "last" {
		where = consumer.ConsumeFromLastOffset
	}
	messageModel := consumer.Clustering
	if *model == "broadcasting" {
		messageModel = consumer.BroadCasting
	}
	opts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		consumer.WithGroupName(*group),
		consumer.WithConsumeFromWhere(where),
		consumer.WithConsumerModel(messageModel),
		consumer.WithConsumerOrder(*orderly),
	}
	if *maxReconsume >= 0 {
		opts = append(opts, consumer.WithMaxReconsumeTimes(int32(*maxReconsume)))
	}
	if *instance != "" {
		opts = append(opts, consumer.WithInstance(*instance))
	}
	selector := consumer.MessageSelector{Type: consumer.TAG, Expression: *expr}
	if *sql != "" {
		selector = consumer.MessageSelector{Type: consumer.SQL92, Expression: *sql}
	}
	c, err := consumer.NewPushConsumer(opts...)
	if err != nil {
		return fmt.Errorf("NewPushConsumer: %w", err)
	}
	var (
		mu       sync.Mutex
		received int
		done     = make(chan struct{})
		once     sync.Once
		last     time.Time
	)
	err = c.Subscribe(*topic, selector,
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				received++
				emit(map[string]any{
					"event": "received", "receivedAt": time.Now().UnixMilli(), "bornTimestamp": m.BornTimestamp,
					"storeTimestamp": m.StoreTimestamp, "msgId": m.MsgId, "offsetMsgId": m.OffsetMsgId, "topic": m.Topic,
					"tags": m.GetTags(), "keys": m.GetKeys(), "body": string(m.Body),
					"queueId": m.Queue.QueueId, "brokerName": m.Queue.BrokerName, "queueOffset": m.QueueOffset,
					"reconsumeTimes": m.ReconsumeTimes, "properties": m.GetProperties(),
				})
			}
			last = time.Now()
			if received >= *count && *idle == 0 {
				once.Do(func() { close(done) })
			}
			for _, m := range msgs {
				if int(m.ReconsumeTimes) < *reconsume {
					return consumer.ConsumeRetryLater, nil
				}
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := c.Start(); err != nil {
		emit(map[string]any{"event": "start_error", "error": err.Error()})
		return fmt.Errorf("consumer start: %w", err)
	}
	emit(map[string]any{"event": "started"})
	if *rebalance > 0 {
		if r, ok := any(c).(interface{ RebalanceIfNotPaused() }); ok {
			refresh := routeRefresher(c)
			go func() {
				ticker := time.NewTicker(*rebalance)
				defer ticker.Stop()
				for {
					select {
					case <-ticker.C:
						refresh()
						r.RebalanceIfNotPaused()
					case <-done:
						return
					}
				}
			}()
		}
	}
	if *count <= 0 && *idle == 0 {
		once.Do(func() { close(done) }) // nothing to wait for: only -linger (messages that should not come)
	}
	if *idle > 0 {
		go func() {
			for {
				time.Sleep(100 * time.Millisecond)
				mu.Lock()
				quiet := !last.IsZero() && time.Since(last) > *idle
				mu.Unlock()
				if quiet {
					once.Do(func() { close(done) })
					return
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(*timeout):
	}
	time.Sleep(*linger)
	// v2.1.2's Shutdown commits each queue's offset with a one-way write and closes its connections
	// at once; Apache RocketMQ then now and then never records one of those commits (1 run in ~13 of
	// test_consumer_restart_resumes_from_committed_offset[apache-go]). Committing once more a moment
	// before Shutdown, as a long-running consumer's periodic commit would have, takes that race out.
	if p, ok := any(c).(interface{ PersistConsumerOffset() error }); ok {
		p.PersistConsumerOffset()
		time.Sleep(200 * time.Millisecond)
	}
	c.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	emit(map[string]any{"event": "done", "received": received, "expected": *count})
	if received < *count {
		return fmt.Errorf("received %d of %d messages within %s", received, *count, *timeout)
	}
	return nil
}

// routeRefresher returns a call of the consumer's client's UpdateTopicRouteInfo, the client's own 30 s route
// poll (the topics it subscribes, its retry topic included, looked up again and handed to the consumer). v2.1.2
// has no public call for it: the client is reached by reflection, as route.go reaches the admin's. A version
// without that field gets a call doing nothing (said on stderr): its consumer learns new routes at its own pace.
func routeRefresher(c any) func() {
	none := func(why string) func() {
		fmt.Fprintf(os.Stderr, "goharness: routes are not refreshed with -rebalance: %s\n", why)
		return func() {}
	}
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return none("the consumer is no struct pointer")
	}
	field := v.Elem().FieldByName("client")
	if !field.IsValid() || !field.CanAddr() {
		return none("the consumer has no client field")
	}
	client := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem()
	update := client.MethodByName("UpdateTopicRouteInfo")
	if !update.IsValid() || update.Type().NumIn() != 0 {
		return none("its client has no UpdateTopicRouteInfo()")
	}
	return func() { update.Call(nil) }
}
