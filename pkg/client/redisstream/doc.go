// Package redisstream reads a Redis stream (Redis 7.0 or later) as an event log behind the
// client's page interface, and writes entries as the Open edX event bus does (Producer).
//
// An address names a stream: redis://[USER:PASSWORD@]HOST[:PORT][/DB]/STREAM, rediss:// for
// TLS. Positions are entry ids, ordered as Redis orders them. A page reads forward with
// XRANGE or back with XREVRANGE, in one transaction with XINFO STREAM, whose counters tell
// what was trimmed or deleted after the reader's position (see judge); a page open at the
// head waits with XREAD BLOCK. Entries read as CloudEvents (see appendItem), and queries of
// evtctl's language are matched here, a page examining a bounded number of entries.
package redisstream
