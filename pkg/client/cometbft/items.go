package cometbft

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// The items of a height, in the order a node's event bus publishes them: first the block's
// events, then each transaction. They have the shape of the items of a Tendermint node's
// event log (the events method), so that whatever reads those reads these:
//
//	{"cursor":"h000000000044.00000000","event":"NewBlockEvents","data":{"type":"tendermint/event/NewBlockEvents",
//	  "value":{"height":"44","events":[...],"num_txs":"1"}}}
//	{"cursor":"h000000000044.00000001","event":"Tx","data":{"type":"tendermint/event/Tx",
//	  "value":{"height":44,"index":0,"hash":"E477…","tx":"cGxhbmV0PW1hcnM=","result":{...}}}}
//
// The block item's value is what CometBFT's bus publishes as NewBlockEvents: the block's
// events (finalize_block_events; on v0.37 begin_block_events then end_block_events, which
// Tendermint's later releases also merged into one list), [] when there are none. Every
// height has one, as every height had a NewBlock item in a Tendermint node's log. A Tx
// item's value is a Tendermint node's Tx item (height a number, tx in base64, result the
// node's result for it, byte for byte) with the index always written and the transaction's
// hash added: the upper-case hex SHA-256 of its bytes, which tx_search and explorers take.
// Every item carries its block's time (client.Item.Time, from the blockchain method's
// headers, read for the height anyway), for the renderers and the terminal UI: a cursor of
// a chain holds none.

// Item event names.
const (
	EventBlock = "NewBlockEvents"
	EventTx    = "Tx"
)

// blockMeta is what the blockchain method says of a height.
type blockMeta struct {
	height int64
	time   time.Time
	hash   string
	numTxs int
}

// heightData is one height read from the node: its items, ready to serve.
type heightData struct {
	meta  blockMeta
	buf   []byte        // the items' JSON, each followed by a newline
	items []client.Item // 1 + meta.numTxs items; Raw, Data and Cursor alias buf

	attrsOnce sync.Once
	attrs     []map[string][]string // each item's flattened attributes, made when first filtered
	size      int64                 // bytes held, about

	marks []itemMarks // while the items are built
}

// buildHeight makes a height's items from its block results (the result object of
// block_results) and its transactions (base64, from block; none for a height without).
func buildHeight(meta blockMeta, res gjson.Result, txs []string) (*heightData, error) {
	h := meta.height
	if rh, err := intField(res, "height"); err != nil || rh != h {
		return nil, fmt.Errorf("block results of height %d name height %s", h, res.Get("height").Raw)
	}
	results := res.Get("txs_results")
	if results.Type != gjson.Null && !results.IsArray() {
		return nil, fmt.Errorf("block results of height %d: txs_results is not an array", h)
	}
	txResults := results.Array()
	if len(txResults) != len(txs) || len(txs) != meta.numTxs {
		return nil, fmt.Errorf("height %d: the block holds %d transactions, its header says %d, its results hold %d", h, len(txs), meta.numTxs, len(txResults))
	}
	events, err := blockEventsRaw(res)
	if err != nil {
		return nil, fmt.Errorf("block results of height %d: %w", h, err)
	}

	size := 200 + len(events)
	for i, r := range txResults {
		size += 260 + len(txs[i]) + len(r.Raw)
	}
	d := &heightData{meta: meta, buf: make([]byte, 0, size), items: make([]client.Item, 0, 1+len(txs))}
	var hs [20]byte
	hText := strconv.AppendInt(hs[:0], h, 10)

	// The block's item.
	start, dataStart := d.open(Position{Height: h}, EventBlock)
	d.buf = append(d.buf, `{"type":"tendermint/event/NewBlockEvents","value":{"height":"`...)
	d.buf = append(d.buf, hText...)
	d.buf = append(d.buf, `","events":`...)
	d.buf = append(d.buf, events...)
	d.buf = append(d.buf, `,"num_txs":"`...)
	d.buf = strconv.AppendInt(d.buf, int64(len(txs)), 10)
	d.buf = append(d.buf, `"}}`...)
	d.close(start, dataStart, EventBlock)

	var raw []byte
	for i, r := range txResults {
		if !r.IsObject() {
			return nil, fmt.Errorf("block results of height %d: the result of transaction %d is not an object", h, i)
		}
		raw, err = base64.StdEncoding.AppendDecode(raw[:0], []byte(txs[i]))
		if err != nil {
			return nil, fmt.Errorf("block %d: transaction %d is not base64: %w", h, i, err)
		}
		sum := sha256.Sum256(raw)
		start, dataStart := d.open(Position{Height: h, Index: int64(i) + 1}, EventTx)
		d.buf = append(d.buf, `{"type":"tendermint/event/Tx","value":{"height":`...)
		d.buf = append(d.buf, hText...)
		d.buf = append(d.buf, `,"index":`...)
		d.buf = strconv.AppendInt(d.buf, int64(i), 10)
		d.buf = append(d.buf, `,"hash":"`...)
		d.buf = appendUpperHex(d.buf, sum[:])
		d.buf = append(d.buf, `","tx":"`...)
		d.buf = base64.StdEncoding.AppendEncode(d.buf, raw)
		d.buf = append(d.buf, `","result":`...)
		d.buf = append(d.buf, r.Raw...)
		d.buf = append(d.buf, `}}`...)
		d.close(start, dataStart, EventTx)
	}
	// The items alias buf: take their slices only now that buf no longer grows.
	d.fix()
	d.size = int64(cap(d.buf)) + int64(len(d.items))*200
	return d, nil
}

// blockEventsRaw returns the JSON array of a height's block events, "[]" for none:
// finalize_block_events, or begin_block_events then end_block_events (v0.37).
func blockEventsRaw(res gjson.Result) ([]byte, error) {
	var parts []gjson.Result
	if fin := res.Get("finalize_block_events"); fin.Exists() {
		parts = append(parts, fin)
	} else {
		parts = append(parts, res.Get("begin_block_events"), res.Get("end_block_events"))
	}
	out := []byte{'['}
	for _, p := range parts {
		if p.Type == gjson.Null || !p.Exists() {
			continue
		}
		if !p.IsArray() {
			return nil, errors.New("block events that are not an array")
		}
		p.ForEach(func(_, ev gjson.Result) bool {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, ev.Raw...)
			return true
		})
	}
	return append(out, ']'), nil
}

// itemMarks records where an item's pieces lie in buf until the buffer stops growing.
type itemMarks struct{ start, data, end int }

// open writes an item's start up to its data and returns where the item and its data begin.
func (d *heightData) open(p Position, event string) (start, data int) {
	start = len(d.buf)
	d.buf = append(d.buf, `{"cursor":"`...)
	d.buf = p.append(d.buf)
	d.buf = append(d.buf, `","event":"`...)
	d.buf = append(d.buf, event...)
	d.buf = append(d.buf, `","data":`...)
	return start, len(d.buf)
}

// close ends an item, notes its place (to be turned into slices by fix), and appends the
// newline that lets a renderer write consecutive items in one piece.
func (d *heightData) close(start, data int, event string) {
	d.buf = append(d.buf, '}')
	end := len(d.buf)
	d.buf = append(d.buf, '\n')
	d.items = append(d.items, client.Item{Item: wire.Item{Event: event}, Time: d.meta.time})
	d.marks = append(d.marks, itemMarks{start: start, data: data, end: end})
}

// fix points each item's Cursor, Data and Raw into buf.
func (d *heightData) fix() {
	for i, m := range d.marks {
		it := &d.items[i]
		it.Raw = d.buf[m.start:m.end] // its capacity reaches the newline after it, for a renderer
		it.Data = d.buf[m.data : m.end-1 : m.end-1]
		c := d.buf[m.start+len(`{"cursor":"`) : m.start+len(`{"cursor":"`)+cursorLen]
		it.Cursor = unsafe.String(unsafe.SliceData(c), len(c))
	}
	d.marks = nil
}

func appendUpperHex(dst, src []byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, hex.EncodedLen(len(src)))...)
	hex.Encode(dst[n:], src)
	for i := n; i < len(dst); i++ {
		if c := dst[i]; 'a' <= c && c <= 'f' {
			dst[i] = c - 'a' + 'A'
		}
	}
	return dst
}

// attributes returns item i's flattened attributes, as a node's event bus flattens an
// event for a subscription: each "type.key" of its ABCI events with its values in order
// (events with an empty type and attributes with an empty key left out, as the bus leaves
// them), and the node's own tags: tm.event, and tx.hash and tx.height for a transaction,
// block.height for the block's item.
func (d *heightData) attributes(i int) map[string][]string {
	d.attrsOnce.Do(func() {
		d.attrs = make([]map[string][]string, len(d.items))
		h := strconv.FormatInt(d.meta.height, 10)
		for j := range d.items {
			m := map[string][]string{}
			path := "value.result.events"
			if j == 0 {
				path = "value.events"
			}
			for _, ev := range jsonOf(d.items[j].Data).Get(path).Array() {
				typ := ev.Get("type").String()
				if typ == "" {
					continue
				}
				ev.Get("attributes").ForEach(func(_, a gjson.Result) bool {
					if k := a.Get("key").String(); k != "" {
						tag := typ + "." + k
						m[tag] = append(m[tag], a.Get("value").String())
					}
					return true
				})
			}
			if j == 0 {
				m["tm.event"] = append(m["tm.event"], EventBlock)
				m["block.height"] = append(m["block.height"], h)
			} else {
				m["tm.event"] = append(m["tm.event"], EventTx)
				m["tx.hash"] = append(m["tx.hash"], jsonOf(d.items[j].Data).Get("value.hash").String())
				m["tx.height"] = append(m["tx.height"], h)
			}
			d.attrs[j] = m
		}
	})
	return d.attrs[i]
}

// jsonOf parses JSON in place: the results alias b, which must not change while they are
// in use.
func jsonOf(b []byte) gjson.Result {
	return gjson.Parse(unsafe.String(unsafe.SliceData(b), len(b)))
}
