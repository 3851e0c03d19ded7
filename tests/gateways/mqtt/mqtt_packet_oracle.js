// Runs the npm package mqtt-packet over a batch of requests read as JSON from stdin:
//   {"generate": [{"version": 4|5, "packet": {...}}], "parse": [{"version": 4|5, "hex": "..."}]}
// and writes {"generated": ["hex" | {"error": "..."}], "parsed": [[packet, ...] | {"error": "..."}]}.
// Buffers travel as {"hex": "..."} both ways.
'use strict'
const mqtt = require('mqtt-packet')

function revive (value) {
  if (Array.isArray(value)) return value.map(revive)
  if (value && typeof value === 'object') {
    if (typeof value.hex === 'string' && Object.keys(value).length === 1) return Buffer.from(value.hex, 'hex')
    const out = {}
    for (const key of Object.keys(value)) out[key] = revive(value[key])
    return out
  }
  return value
}

function bufferToHex (key, value) {
  if (value && value.type === 'Buffer' && Array.isArray(value.data)) return { hex: Buffer.from(value.data).toString('hex') }
  return value
}

function generate ({ version, packet }) {
  try {
    return mqtt.generate(revive(packet), { protocolVersion: version }).toString('hex')
  } catch (error) {
    return { error: String(error && error.message) }
  }
}

function parse ({ version, hex }) {
  const parser = mqtt.parser({ protocolVersion: version })
  const packets = []
  let error = null
  parser.on('packet', (packet) => packets.push(packet))
  parser.on('error', (err) => { error = error || String(err.message) })
  parser.parse(Buffer.from(hex, 'hex'))
  return error ? { error } : packets
}

let input = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => { input += chunk })
process.stdin.on('end', () => {
  const request = JSON.parse(input)
  const response = {
    generated: (request.generate || []).map(generate),
    parsed: (request.parse || []).map(parse)
  }
  process.stdout.write(JSON.stringify(response, bufferToHex))
})
