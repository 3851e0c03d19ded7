package main

import (
	"context"
	"fmt"
	"strconv"
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
	sent := 0
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
		res, err := p.SendSync(context.Background(), msg)
		if err != nil {
			emit(map[string]any{"event": "send_error", "index": i, "error": err.Error()})
			continue
		}
		sent++
		emit(map[string]any{
			"event": "sent", "index": i, "status": int(res.Status), "msgId": res.MsgID,
			"offsetMsgId": res.OffsetMsgID, "queueOffset": res.QueueOffset,
			"brokerName": res.MessageQueue.BrokerName, "queueId": res.MessageQueue.QueueId,
		})
	}
	emit(map[string]any{"event": "done", "sent": sent, "requested": *count})
	if sent != *count {
		return fmt.Errorf("%d of %d sends failed", *count-sent, *count)
	}
	return nil
}
