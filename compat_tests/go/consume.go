package main

import (
	"context"
	"fmt"
	"sync"
	"time"

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
	c, err := consumer.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		consumer.WithGroupName(*group),
		consumer.WithConsumeFromWhere(where),
		consumer.WithConsumerModel(messageModel),
		consumer.WithConsumerOrder(*orderly),
	)
	if err != nil {
		return fmt.Errorf("NewPushConsumer: %w", err)
	}
	var (
		mu       sync.Mutex
		received int
		done     = make(chan struct{})
		once     sync.Once
	)
	err = c.Subscribe(*topic, consumer.MessageSelector{Type: consumer.TAG, Expression: *expr},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				received++
				emit(map[string]any{
					"event": "received", "msgId": m.MsgId, "offsetMsgId": m.OffsetMsgId, "topic": m.Topic,
					"tags": m.GetTags(), "keys": m.GetKeys(), "body": string(m.Body),
					"queueId": m.Queue.QueueId, "brokerName": m.Queue.BrokerName, "queueOffset": m.QueueOffset,
					"reconsumeTimes": m.ReconsumeTimes, "properties": m.GetProperties(),
				})
			}
			if received >= *count {
				once.Do(func() { close(done) })
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("consumer start: %w", err)
	}
	select {
	case <-done:
	case <-time.After(*timeout):
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
