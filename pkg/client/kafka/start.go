package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Bounds reports every partition's log start (oldest) and end (newest, the last stable
// offset) as positions. A topic that holds no record has them equal.
func (s *Source) Bounds(ctx context.Context) (oldest, newest string, err error) {
	mk, err := s.refresh(ctx)
	if err != nil {
		return "", "", final(err)
	}
	return Position(mk.start).String(), Position(mk.end).String(), nil
}

// At is the position of every partition's first record stamped at or after t (its end
// where it has none): a reader after it reads from t on. It is made up, not a position a
// reader held: pages after it are asked with NoGap.
func (s *Source) At(ctx context.Context, t time.Time) (string, error) {
	td, err := s.topic(ctx)
	if err != nil {
		return "", final(err)
	}
	// Records are stamped in whole milliseconds: the first at or after t is the first at or
	// after t rounded up to one.
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	l, err := s.adm.ListOffsetsAfterMilli(ctx, ms, s.cfg.Topic)
	if err != nil {
		return "", final(s.classify(err))
	}
	pos := make(Position, len(td.Partitions))
	if err := fill(pos, l, s.cfg.Topic); err != nil {
		return "", final(s.classify(err))
	}
	return pos.String(), nil
}

// identity is what a checkpoint keeps of the topic it was read from.
type identity struct {
	Topic string `json:"kafka_topic"`
	// ID is the topic's id (see topicID); "" when the cluster gives none.
	ID string `json:"kafka_topic_id,omitempty"`
}

// Identity names the topic, for a checkpoint: its name and its id, which a topic deleted
// and made again under the same name does not keep. It is the same at every position.
func (s *Source) Identity(ctx context.Context, _ string) (json.RawMessage, error) {
	// The id the reader saw last: a reader refuses to go on in a topic made again (see
	// refresh), so it names the topic the positions it handed out are of.
	id := s.known().id
	if id == (kadm.TopicID{}) {
		td, err := s.topic(ctx)
		if err != nil {
			return nil, final(err)
		}
		id = td.ID
	}
	return json.Marshal(identity{Topic: s.cfg.Topic, ID: idText(id)})
}

// CheckIdentity refuses a position saved from another topic, or from this one before it
// was deleted and made again.
func (s *Source) CheckIdentity(ctx context.Context, saved json.RawMessage) error {
	var id identity
	if err := json.Unmarshal(saved, &id); err != nil || id.Topic == "" {
		return fmt.Errorf("the saved position's topic is unreadable (%s)", clip(string(saved)))
	}
	if id.Topic != s.cfg.Topic {
		return fmt.Errorf("it was read from topic %q, not %q", id.Topic, s.cfg.Topic)
	}
	td, err := s.topic(ctx)
	if err != nil {
		return final(err)
	}
	now := idText(td.ID)
	if id.ID != "" && now != "" && id.ID != now {
		return fmt.Errorf("topic %q was deleted and made again since (its id was %s, and is %s)", s.cfg.Topic, id.ID, now)
	}
	return nil
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
		return final(s.commitErr(group, err))
	}
	s.answered.Store(true)
	if err := resp.Error(); err != nil {
		return final(s.commitErr(group, err))
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
		return "", false, final(err)
	}
	resp, err := s.adm.FetchOffsetsForTopics(ctx, group, s.cfg.Topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, final(s.classify(err))
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
