package main

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// runPull drains a topic with the Go pull consumer (Subscribe + Pull), printing every message.
func runPull(args []string) error {
	fs := newFlags("pull")
	namesrv := fs.String("n", "", "name server address host:port")
	topic := fs.String("t", "", "topic")
	group := fs.String("g", "goharness_pull", "consumer group")
	count := fs.Int("count", 1, "stop after this many messages")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.Parse(args)
	c, err := consumer.NewPullConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		consumer.WithGroupName(*group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return fmt.Errorf("NewPullConsumer: %w", err)
	}
	if err := c.Subscribe(*topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("pull consumer start: %w", err)
	}
	defer c.Shutdown()
	// Pull() in v2.1.2 ignores its context and never advances its own offset, so an empty queue holds it
	// for the broker's whole long-poll; PullFrom over the topic's queues, with a deadline, is usable.
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{*namesrv})))
	if err != nil {
		return fmt.Errorf("NewAdmin: %w", err)
	}
	defer adm.Close()
	queues, err := adm.FetchPublishMessageQueues(context.Background(), *topic)
	if err != nil {
		return fmt.Errorf("FetchPublishMessageQueues: %w", err)
	}
	received := 0
	statuses := map[string]int{}
	offsets := map[int]int64{}
	end := time.Now().Add(*timeout)
	for received < *count && time.Now().Before(end) {
		for _, mq := range queues {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			res, err := c.PullFrom(ctx, mq, offsets[mq.QueueId], 32)
			cancel()
			if err != nil {
				statuses["error"]++
				continue
			}
			statuses[fmt.Sprint(res.Status)]++
			offsets[mq.QueueId] = res.NextBeginOffset
			for _, m := range res.GetMessageExts() {
				received++
				emit(map[string]any{"event": "received", "msgId": m.MsgId, "body": string(m.Body),
					"queueId": m.Queue.QueueId, "queueOffset": m.QueueOffset})
			}
			if len(res.GetMessageExts()) > 0 {
				c.UpdateOffset(mq, res.NextBeginOffset)
			}
		}
	}
	c.PersistOffset(context.Background(), *topic)
	emit(map[string]any{"event": "done", "received": received, "expected": *count, "statuses": statuses})
	if received < *count {
		return fmt.Errorf("pulled %d of %d messages within %s", received, *count, *timeout)
	}
	return nil
}
