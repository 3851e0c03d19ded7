// The official RocketMQ 5 Node.js client (rocketmq-client-nodejs) for FerryMQ's compatibility tests.
//
//   node scenarios.js exchange ENDPOINT TOPIC GROUP
//
// Its Producer sends a message with a tag, keys and a property, and one in a transaction it commits;
// then its SimpleConsumer (of GROUP) receives both and acks them. One JSON object a line on stdout;
// the client's warnings and errors go to stderr.
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n');
const logger = {
  info() {},
  debug() {},
  warn: (...args) => console.error('WARN', ...args),
  error: (...args) => console.error('ERROR', ...args),
};

async function send(endpoints, topic) {
  const producer = new Producer({ endpoints, namespace: '', topics: [ topic ], logger,
    checker: { async check() { return 1; } } }); // TransactionResolution.COMMIT
  await producer.startup();
  try {
    const sentAt = Date.now();
    const plain = await producer.send({ topic, body: Buffer.from('node-plain'), tag: 'TagNode', keys: [ 'nk1', 'nk2' ],
      properties: new Map([[ 'color', 'green' ]]) });
    emit({ event: 'sent', body: 'node-plain', msgId: plain.messageId, sentAt });
    const transaction = producer.beginTransaction();
    const half = await producer.send({ topic, body: Buffer.from('node-committed'), tag: 'TagNode' }, transaction);
    await transaction.commit();
    emit({ event: 'sent', body: 'node-committed', msgId: half.messageId, sentAt: Date.now() });
  } finally {
    await producer.shutdown();
  }
}

async function receive(endpoints, topic, group, count, timeoutMs) {
  const consumer = new SimpleConsumer({ endpoints, namespace: '', consumerGroup: group, logger, awaitDuration: 5000,
    subscriptions: new Map([[ topic, '*' ]]) });
  await consumer.startup();
  const acked = new Set();
  const deadline = Date.now() + timeoutMs;
  try {
    while (acked.size < count) {
      if (Date.now() > deadline) throw new Error(`acked ${acked.size} of ${count} messages within ${timeoutMs} ms`);
      for (const view of await consumer.receive(16, 15000)) {
        await consumer.ack(view);
        emit({ event: 'received', body: view.body.toString(), msgId: view.messageId, tag: view.tag ?? '',
          keys: view.keys, properties: Object.fromEntries(view.properties), attempt: view.deliveryAttempt });
        acked.add(view.body.toString());
      }
    }
  } finally {
    await consumer.shutdown();
  }
}

async function main([ scenario, endpoints, topic, group ]) {
  if (scenario !== 'exchange' || !group) {
    console.error('usage: node scenarios.js exchange ENDPOINT TOPIC GROUP');
    return 2;
  }
  await send(endpoints, topic);
  await receive(endpoints, topic, group, 2, 30000);
  emit({ event: 'done' });
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => { emit({ event: 'error', error: String(error && error.stack || error) }); process.exit(1); });
