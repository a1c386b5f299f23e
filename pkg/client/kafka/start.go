package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// StartKind is a starting point of a reader.
type StartKind int

// Starting points.
const (
	StartHead   StartKind = iota // every partition's end: only records written from now on
	StartOldest                  // every partition's log start
	StartTime                    // in every partition, the first record stamped at or after Time
)

// Start names a starting point.
type Start struct {
	Kind StartKind
	Time time.Time // for StartTime
}

// Start returns the position of a starting point. A time's position is made up (ask pages
// after it with NoGap): in a partition with no record at or after the time, it is the end.
func (s *Source) Start(ctx context.Context, at Start) (string, error) {
	switch at.Kind {
	case StartHead, StartOldest:
		mk, err := s.refresh(ctx)
		if err != nil {
			return "", err
		}
		if at.Kind == StartHead {
			return Position(mk.end).String(), nil
		}
		return Position(mk.start).String(), nil
	case StartTime:
		td, err := s.topic(ctx)
		if err != nil {
			return "", err
		}
		l, err := s.adm.ListOffsetsAfterMilli(ctx, at.Time.UnixMilli(), s.cfg.Topic)
		if err != nil {
			return "", s.classify(err)
		}
		pos := make(Position, len(td.Partitions))
		if err := fill(pos, l, s.cfg.Topic); err != nil {
			return "", s.classify(err)
		}
		return pos.String(), nil
	}
	return "", fmt.Errorf("kafka: unknown starting point %d", at.Kind)
}

// Commit commits pos to the consumer group named group, as the group's offsets of the
// topic, so that other Kafka tools see how far evtctl read (the next offset of each
// partition, as Kafka consumers commit). Call it once what came before pos is written
// out. It needs no membership in the group; a group whose members are consuming refuses it.
func (s *Source) Commit(ctx context.Context, group, pos string) error {
	if group == "" {
		return errors.New("kafka: no consumer group given")
	}
	p, err := ParsePosition(pos)
	if err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	var os kadm.Offsets
	for i, o := range p {
		os.Add(kadm.Offset{Topic: s.cfg.Topic, Partition: int32(i), At: o, LeaderEpoch: -1})
	}
	resp, err := s.adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return s.commitErr(group, err)
	}
	s.answered.Store(true)
	if err := resp.Error(); err != nil {
		return s.commitErr(group, err)
	}
	return nil
}

func (s *Source) commitErr(group string, err error) error {
	switch {
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.RebalanceInProgress):
		return &GroupError{Group: group, Msg: "its members are consuming; evtctl commits only to a group that has none", Err: err}
	case errors.Is(err, kerr.GroupAuthorizationFailed), errors.Is(err, kerr.TopicAuthorizationFailed):
		return &GroupError{Group: group, Msg: "not authorized", Err: err}
	case errors.Is(err, kerr.InvalidGroupID):
		return &GroupError{Group: group, Msg: "not a valid group id", Err: err}
	}
	return s.classify(err)
}

// GroupError is a commit a consumer group refused. It is final.
type GroupError struct {
	Group, Msg string
	Err        error
}

func (e *GroupError) Error() string {
	return fmt.Sprintf("consumer group %q: %s (%v)", e.Group, e.Msg, e.Err)
}

func (e *GroupError) Unwrap() error { return e.Err }

// Committed returns the position a consumer group committed for the topic: its offset in
// each partition, and the log start in a partition it has no offset for. ok is false when
// the group committed nothing for the topic.
func (s *Source) Committed(ctx context.Context, group string) (pos string, ok bool, err error) {
	mk, err := s.refresh(ctx)
	if err != nil {
		return "", false, err
	}
	resp, err := s.adm.FetchOffsetsForTopics(ctx, group, s.cfg.Topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.classify(err)
	}
	p := make(Position, len(mk.start))
	for i := range p {
		p[i] = mk.start[i]
		if o, found := resp.Lookup(s.cfg.Topic, int32(i)); found && o.Err == nil && o.At >= 0 {
			p[i], ok = o.At, true
		}
	}
	if !ok {
		return "", false, nil
	}
	return p.String(), true, nil
}
