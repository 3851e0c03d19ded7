package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	mode := fs.String("mode", "sync", "sync, async, oneway, batch (all messages in one SEND_BATCH_MESSAGE) or selector (sync, queue by hash of each spec entry's shard)")
	spec := fs.String("spec", "", "JSON file: [{body, tag, keys, props, shard, delayLevel}]; replaces -count/-tag/-keys/-body")
	delayLevel := fs.Int("delayLevel", 0, "delay level for every message (0: none)")
	deliverAfter := fs.Duration("deliverAfter", 0, "timer message: deliver this long after sending (property TIMER_DELIVER_MS)")
	interval := fs.Duration("interval", 0, "sync mode: pause this long between two sends")
	linger := fs.Duration("linger", 0, "stay connected this long after sending (for producerConnection)")
	accessKey := fs.String("ak", "", "ACL 2.0 access key: requests are signed with -sk (none without -ak)")
	secretKey := fs.String("sk", "", "ACL 2.0 secret key")
	fs.Parse(args)
	if *namesrv == "" || *topic == "" {
		return fmt.Errorf("send needs -n NAMESRV and -t TOPIC")
	}
	options := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		producer.WithGroupName(*group),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(*timeout),
		producer.WithQueueSelector(producer.NewHashQueueSelector()),
	}
	if *accessKey != "" {
		options = append(options, producer.WithCredentials(primitive.Credentials{AccessKey: *accessKey, SecretKey: *secretKey}))
	}
	p, err := producer.NewDefaultProducer(options...)
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
	if *spec != "" {
		if msgs, err = messagesFromSpec(*topic, *spec); err != nil {
			return err
		}
		*count = len(msgs)
	}
	for _, msg := range msgs {
		if *delayLevel > 0 {
			msg.WithDelayTimeLevel(*delayLevel)
		}
	}
	if *deliverAfter > 0 {
		// v2.1.2 has no timer-message API; the 5.x Java client's setDeliverTimeMs sets this property.
		at := time.Now().Add(*deliverAfter).UnixMilli()
		for _, msg := range msgs {
			msg.WithProperty("TIMER_DELIVER_MS", strconv.FormatInt(at, 10))
		}
		emit(map[string]any{"event": "deliver_at", "deliverTimeMs": at})
	}
	sent := 0
	switch *mode {
	case "selector":
		for i, msg := range msgs {
			res, err := p.SendSync(context.Background(), msg)
			if err != nil {
				emit(map[string]any{"event": "send_error", "index": i, "error": err.Error()})
				continue
			}
			sent++
			emitSent(i, res)
		}
	case "sync":
		for i, msg := range msgs {
			if *interval > 0 && i > 0 {
				time.Sleep(*interval)
			}
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
	if *linger > 0 {
		emit(map[string]any{"event": "lingering"})
		time.Sleep(*linger)
	}
	emit(map[string]any{"event": "done", "sent": sent, "requested": *count, "mode": *mode})
	if sent != *count {
		return fmt.Errorf("%d of %d sends failed", *count-sent, *count)
	}
	return nil
}

func emitSent(index int, res *primitive.SendResult) {
	emit(map[string]any{
		"event": "sent", "index": index, "sentAt": time.Now().UnixMilli(), "status": int(res.Status), "msgId": res.MsgID,
		"offsetMsgId": res.OffsetMsgID, "queueOffset": res.QueueOffset,
		"brokerName": res.MessageQueue.BrokerName, "queueId": res.MessageQueue.QueueId,
	})
}

// messagesFromSpec reads [{body, tag, keys, props, shard, delayLevel}] into messages; "shard" becomes the
// sharding key the hash queue selector uses.
func messagesFromSpec(topic, file string) ([]*primitive.Message, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var spec []struct {
		Body       string         `json:"body"`
		Tag        string         `json:"tag"`
		Keys       string         `json:"keys"`
		Shard      string         `json:"shard"`
		DelayLevel int            `json:"delayLevel"`
		Props      map[string]any `json:"props"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("spec %s: %w", file, err)
	}
	out := make([]*primitive.Message, 0, len(spec))
	for _, e := range spec {
		m := primitive.NewMessage(topic, []byte(e.Body))
		if e.Tag != "" {
			m.WithTag(e.Tag)
		}
		if e.Keys != "" {
			m.WithKeys([]string{e.Keys})
		}
		if e.Shard != "" {
			m.WithShardingKey(e.Shard)
		}
		if e.DelayLevel > 0 {
			m.WithDelayTimeLevel(e.DelayLevel)
		}
		for k, v := range e.Props {
			m.WithProperty(k, fmt.Sprint(v))
		}
		out = append(out, m)
	}
	return out, nil
}
