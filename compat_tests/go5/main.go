// Command go5harness drives the official RocketMQ 5 gRPC client for Go
// (github.com/apache/rocketmq-clients/golang/v5) for FerryMQ's compatibility tests: its Producer sends
// the messages of a spec file, then its SimpleConsumer receives and acks them. It prints one JSON object
// a line on stdout; the client's own log goes to files under rocketmq.client.logRoot.
//
//	go5harness exchange -endpoint HOST:PORT -t TOPIC -g GROUP -spec FILE [-timeout 30s]
//
// FILE has one message a line, its fields tab-separated name=value: body, tag, keys (comma-separated),
// group (message group), delayMs (delivery after), txn=commit (sent in a transaction, then committed) or
// txn=open (left open: the server checks it back, the checker answers COMMIT), prop.NAME. The producer
// stays up while the consumer receives until it has acked one delivery of every body.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

// emit writes one JSON object a line on stdout: the machine-readable channel to pytest.
func emit(v map[string]any) {
	line, err := json.Marshal(v)
	if err != nil {
		line, _ = json.Marshal(map[string]any{"event": "error", "error": err.Error()})
	}
	fmt.Println(string(line))
}

// requestTimeout is each call's deadline (the SDK's default is 3 s): the test machine may be loaded.
const requestTimeout = 10 * time.Second

// withRequestTimeout sets requestTimeout on a client before its start (a method outside the SDK's interfaces).
func withRequestTimeout(client any) {
	if c, ok := client.(interface{ SetRequestTimeout(time.Duration) }); ok {
		c.SetRequestTimeout(requestTimeout)
	}
}

func readSpec(path string) ([]map[string]string, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var spec []map[string]string
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		if scanner.Text() == "" {
			continue
		}
		fields := map[string]string{}
		for _, field := range strings.Split(scanner.Text(), "\t") {
			kv := strings.SplitN(field, "=", 2)
			fields[kv[0]] = kv[1]
		}
		spec = append(spec, fields)
	}
	return spec, scanner.Err()
}

func message(topic string, fields map[string]string) *rmq.Message {
	msg := &rmq.Message{Topic: topic, Body: []byte(fields["body"])}
	for name, value := range fields {
		switch {
		case name == "tag":
			msg.SetTag(value)
		case name == "keys":
			msg.SetKeys(strings.Split(value, ",")...)
		case name == "group":
			msg.SetMessageGroup(value)
		case name == "delayMs":
			ms, _ := strconv.Atoi(value)
			msg.SetDelayTimestamp(time.Now().Add(time.Duration(ms) * time.Millisecond))
		case strings.HasPrefix(name, "prop."):
			msg.AddProperty(strings.TrimPrefix(name, "prop."), value)
		}
	}
	return msg
}

// send starts a producer and sends the spec's messages; the caller stops the producer.
func send(config *rmq.Config, topic string, spec []map[string]string) (rmq.Producer, error) {
	producer, err := rmq.NewProducer(config, rmq.WithTopics(topic),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{
			Check: func(view *rmq.MessageView) rmq.TransactionResolution {
				emit(map[string]any{"event": "checked", "msgId": view.GetMessageId(), "body": string(view.GetBody()),
					"properties": view.GetProperties()})
				return rmq.COMMIT
			},
		}))
	if err != nil {
		return nil, fmt.Errorf("NewProducer: %w", err)
	}
	withRequestTimeout(producer)
	if err := producer.Start(); err != nil {
		return nil, fmt.Errorf("producer start: %w", err)
	}
	for i, fields := range spec {
		msg := message(topic, fields)
		sentAt := time.Now().UnixMilli()
		var receipts []*rmq.SendReceipt
		if txn := fields["txn"]; txn != "" {
			transaction := producer.BeginTransaction()
			receipts, err = producer.SendWithTransaction(context.Background(), msg, transaction)
			if err == nil && txn == "commit" {
				err = transaction.Commit()
			}
		} else {
			receipts, err = producer.Send(context.Background(), msg)
		}
		if err != nil {
			producer.GracefulStop()
			return nil, fmt.Errorf("send %q: %w", fields["body"], err)
		}
		emit(map[string]any{"event": "sent", "index": i, "sentAt": sentAt, "msgId": receipts[0].MessageID})
	}
	return producer, nil
}

func receive(config *rmq.Config, topic string, count int, timeout time.Duration) error {
	consumer, err := rmq.NewSimpleConsumer(config, rmq.WithSimpleAwaitDuration(5*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		return fmt.Errorf("NewSimpleConsumer: %w", err)
	}
	withRequestTimeout(consumer)
	if err := consumer.Start(); err != nil {
		return fmt.Errorf("consumer start: %w", err)
	}
	defer consumer.GracefulStop()
	acked := map[string]bool{}
	deadline := time.Now().Add(timeout)
	for len(acked) < count {
		if time.Now().After(deadline) {
			return fmt.Errorf("acked %d of %d bodies within %s", len(acked), count, timeout)
		}
		views, err := consumer.Receive(context.Background(), 16, 15*time.Second)
		if err != nil {
			// no message within the await duration (at least the proxy's 5 s minimum) is an error to this SDK
			emit(map[string]any{"event": "receive_error", "error": err.Error()})
			continue
		}
		for _, view := range views {
			tag, group := "", ""
			if view.GetTag() != nil {
				tag = *view.GetTag()
			}
			if view.GetMessageGroup() != nil {
				group = *view.GetMessageGroup()
			}
			event := map[string]any{"event": "received", "body": string(view.GetBody()), "msgId": view.GetMessageId(),
				"tag": tag, "keys": view.GetKeys(), "properties": view.GetProperties(), "messageGroup": group,
				"attempt": view.GetDeliveryAttempt(), "at": time.Now().UnixMilli()}
			if err := consumer.Ack(context.Background(), view); err != nil {
				return fmt.Errorf("ack %q: %w", view.GetBody(), err)
			}
			emit(event)
			acked[string(view.GetBody())] = true
		}
	}
	return nil
}

func exchange(args []string) error {
	fs := flag.NewFlagSet("exchange", flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "the gRPC endpoint host:port")
	topic := fs.String("t", "", "topic")
	group := fs.String("g", "", "the SimpleConsumer's group")
	specPath := fs.String("spec", "", "the messages to send")
	timeout := fs.Duration("timeout", 30*time.Second, "how long the consumer may take")
	fs.Parse(args)
	spec, err := readSpec(*specPath)
	if err != nil {
		return err
	}
	credential := &credentials.SessionCredentials{}
	producer, err := send(&rmq.Config{Endpoint: *endpoint, Credentials: credential}, *topic, spec)
	if err != nil {
		return err
	}
	defer producer.GracefulStop() // up for the check-back of an open transaction
	return receive(&rmq.Config{Endpoint: *endpoint, ConsumerGroup: *group, Credentials: credential}, *topic,
		len(spec), *timeout)
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "exchange" {
		fmt.Fprintln(os.Stderr, "usage: go5harness exchange -endpoint HOST:PORT -t TOPIC -g GROUP -spec FILE [-timeout D]")
		os.Exit(2)
	}
	if err := exchange(os.Args[2:]); err != nil {
		emit(map[string]any{"event": "error", "error": err.Error()})
		os.Exit(1)
	}
	emit(map[string]any{"event": "done"})
}
