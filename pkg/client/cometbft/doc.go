// Package cometbft reads the events of a CometBFT chain (the v0.37, v0.38 and v1 lines)
// from a node's RPC as items of the shape a Tendermint node's event log serves, with
// cursors that name a height and a place in its block, the same on every node of the chain.
//
// The truth is block_results (and block, for the transactions' bytes and hashes, only at
// heights that hold transactions, which the blockchain method tells twenty heights a call),
// never the websocket's payloads: the websocket only wakes a reader waiting at the head.
// A Reader pages forward and back over heights with several calls in flight, tells a reader
// behind the node's pruning which heights it lost, finds a height by time, and checks a
// saved position against the chain it is resumed on.
package cometbft
