package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// txListener answers by the message property "txmode": commit, rollback, unknown-commit (UNKNOW
// first, COMMIT on check-back) or unknown (UNKNOW always).
type txListener struct {
	mu     sync.Mutex
	checks map[string]int
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch m.GetProperty("txmode") {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnknowState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checks[m.GetKeys()]++
	n := l.checks[m.GetKeys()]
	l.mu.Unlock()
	mode := m.GetProperty("txmode")
	emit(map[string]any{"event": "check", "keys": m.GetKeys(), "txmode": mode, "n": n, "at": time.Now().UnixMilli()})
	if mode == "unknown-commit" {
		return primitive.CommitMessageState
	}
	return primitive.UnknowState
}

func runTxn(args []string) error {
	fs := newFlags("txn")
	namesrv := fs.String("n", "", "name server address host:port")
	topic := fs.String("t", "", "topic")
	group := fs.String("group", "goharness_tx", "producer group")
	spec := fs.String("spec", "", "JSON message spec (see send)")
	linger := fs.Duration("linger", 0, "stay connected this long to answer check-backs")
	fs.Parse(args)
	msgs, err := messagesFromSpec(*topic, *spec)
	if err != nil {
		return err
	}
	p, err := producer.NewTransactionProducer(&txListener{checks: map[string]int{}},
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		producer.WithGroupName(*group),
		producer.WithRetry(2),
	)
	if err != nil {
		return fmt.Errorf("NewTransactionProducer: %w", err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("transaction producer start: %w", err)
	}
	defer p.Shutdown()
	failed := 0
	for i, m := range msgs {
		res, err := p.SendMessageInTransaction(context.Background(), m)
		if err != nil {
			failed++
			emit(map[string]any{"event": "send_error", "index": i, "error": err.Error()})
			continue
		}
		emit(map[string]any{"event": "sent", "index": i, "keys": m.GetKeys(), "status": int(res.Status),
			"msgId": res.MsgID, "transactionId": res.TransactionID, "localState": int(res.State)})
	}
	time.Sleep(*linger)
	emit(map[string]any{"event": "done", "sent": len(msgs) - failed, "at": time.Now().UnixMilli()})
	if failed > 0 {
		return fmt.Errorf("%d transactional sends failed", failed)
	}
	return nil
}
