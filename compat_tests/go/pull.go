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
	// Pull() in v2.1.2 never advances its own offset, so an empty queue holds it for the broker's whole
	// long-poll each time; PullFrom over the topic's queues is usable.
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{*namesrv})))
	if err != nil {
		return fmt.Errorf("NewAdmin: %w", err)
	}
	defer adm.Close()
	queues, err := adm.FetchPublishMessageQueues(context.Background(), *topic)
	if err != nil {
		return fmt.Errorf("FetchPublishMessageQueues: %w", err)
	}
	// Each queue is pulled on its own: PullFrom ignores its context's deadline, and the broker holds a pull
	// of a drained queue for its whole long-poll (20 s), which must not delay the other queues.
	pulled := make(chan pullOutcome)
	for _, mq := range queues {
		go pullQueue(c, mq, pulled)
	}
	received := 0
	statuses := map[string]int{}
	deadline := time.After(*timeout)
	for received < *count {
		var got pullOutcome
		select {
		case got = <-pulled:
		case <-deadline:
		}
		if got.status == "" {
			break
		}
		statuses[got.status]++
		for _, m := range got.messages {
			received++
			emit(map[string]any{"event": "received", "msgId": m.MsgId, "body": string(m.Body),
				"queueId": m.Queue.QueueId, "queueOffset": m.QueueOffset})
		}
	}
	c.PersistOffset(context.Background(), *topic)
	emit(map[string]any{"event": "done", "received": received, "expected": *count, "statuses": statuses})
	if received < *count {
		return fmt.Errorf("pulled %d of %d messages within %s", received, *count, *timeout)
	}
	return nil
}

// pullOutcome is one PullFrom's result: its status ("error" when it failed) and the messages it brought.
type pullOutcome struct {
	status   string
	messages []*primitive.MessageExt
}

// queuePuller is the part of v2.1.2's pull consumer pullQueue uses.
type queuePuller interface {
	PullFrom(ctx context.Context, queue *primitive.MessageQueue, offset int64, numbers int) (*primitive.PullResult, error)
	UpdateOffset(queue *primitive.MessageQueue, offset int64) error
}

// pullQueue pulls mq from offset 0 on, for as long as the process runs, sending each outcome to out.
func pullQueue(c queuePuller, mq *primitive.MessageQueue, out chan<- pullOutcome) {
	offset := int64(0)
	for {
		res, err := c.PullFrom(context.Background(), mq, offset, 32)
		if err != nil {
			out <- pullOutcome{status: "error"}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		offset = res.NextBeginOffset
		msgs := res.GetMessageExts()
		if len(msgs) > 0 {
			c.UpdateOffset(mq, res.NextBeginOffset)
		}
		out <- pullOutcome{status: fmt.Sprint(res.Status), messages: msgs}
	}
}
