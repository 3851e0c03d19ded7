package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// runSend sends -count messages with SendSync and prints each SendResult.
func runSend(args []string) error {
	fs := newFlags("send")
	namesrv := fs.String("n", "", "name server address host:port")
	topic := fs.String("t", "", "topic")
	group := fs.String("group", "goharness_producer", "producer group")
	count := fs.Int("count", 1, "number of messages")
	tag := fs.String("tag", "", "message tag")
	keys := fs.String("keys", "", "message keys")
	body := fs.String("body", "hello from the Go client", "message body; a message number is appended when -count > 1")
	timeout := fs.Duration("timeout", 3*time.Second, "send timeout")
	mode := fs.String("mode", "sync", "sync, async, oneway, or batch (all messages in one SEND_BATCH_MESSAGE)")
	fs.Parse(args)
	if *namesrv == "" || *topic == "" {
		return fmt.Errorf("send needs -n NAMESRV and -t TOPIC")
	}
	p, err := producer.NewDefaultProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		producer.WithGroupName(*group),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(*timeout),
	)
	if err != nil {
		return fmt.Errorf("NewDefaultProducer: %w", err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("producer start: %w", err)
	}
	defer p.Shutdown()
	msgs := make([]*primitive.Message, 0, *count)
	for i := 0; i < *count; i++ {
		text := *body
		if *count > 1 {
			text += " #" + strconv.Itoa(i)
		}
		msg := primitive.NewMessage(*topic, []byte(text))
		if *tag != "" {
			msg.WithTag(*tag)
		}
		if *keys != "" {
			msg.WithKeys([]string{*keys})
		}
		msgs = append(msgs, msg)
	}
	sent := 0
	switch *mode {
	case "sync":
		for i, msg := range msgs {
			res, err := p.SendSync(context.Background(), msg)
			if err != nil {
				emit(map[string]any{"event": "send_error", "index": i, "error": err.Error()})
				continue
			}
			sent++
			emitSent(i, res)
		}
	case "batch":
		res, err := p.SendSync(context.Background(), msgs...)
		if err != nil {
			emit(map[string]any{"event": "send_error", "index": 0, "error": err.Error()})
		} else {
			sent = len(msgs)
			emitSent(0, res)
		}
	case "oneway":
		for i, msg := range msgs {
			if err := p.SendOneWay(context.Background(), msg); err != nil {
				emit(map[string]any{"event": "send_error", "index": i, "error": err.Error()})
				continue
			}
			sent++
			emit(map[string]any{"event": "sent", "index": i, "status": "ONEWAY"})
		}
	case "async":
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, msg := range msgs {
			i := i
			wg.Add(1)
			err := p.SendAsync(context.Background(), func(ctx context.Context, res *primitive.SendResult, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					emit(map[string]any{"event": "send_error", "index": i, "error": err.Error()})
					return
				}
				sent++
				emitSent(i, res)
			}, msg)
			if err != nil {
				wg.Done()
				emit(map[string]any{"event": "send_error", "index": i, "error": err.Error()})
			}
		}
		wg.Wait()
	default:
		return fmt.Errorf("-mode must be sync, async, oneway or batch, not %q", *mode)
	}
	emit(map[string]any{"event": "done", "sent": sent, "requested": *count, "mode": *mode})
	if sent != *count {
		return fmt.Errorf("%d of %d sends failed", *count-sent, *count)
	}
	return nil
}

func emitSent(index int, res *primitive.SendResult) {
	emit(map[string]any{
		"event": "sent", "index": index, "status": int(res.Status), "msgId": res.MsgID,
		"offsetMsgId": res.OffsetMsgID, "queueOffset": res.QueueOffset,
		"brokerName": res.MessageQueue.BrokerName, "queueId": res.MessageQueue.QueueId,
	})
}
