package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/eventlog"
)

// ensureStream makes sure the stream exists and suits evtctl. With Options.Manage it
// creates a missing stream and updates the limits, replicas and settings that differ from
// the options; without, it only checks.
func (s *Store) ensureStream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	str, err := s.js.Stream(ctx, s.opts.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if !s.opts.Manage {
			return fmt.Errorf("NATS JetStream stream %q does not exist: create it (file storage, limits retention, allow_direct, subject %q), or let evtctl manage the stream (--nats-manage-stream)", s.opts.Stream, s.subject)
		}
		cfg := s.wantConfig(jetstream.StreamConfig{
			Name:        s.opts.Stream,
			Description: "evtctl event log",
			Subjects:    []string{s.subject},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
		})
		str, err = s.js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another node created it just now, otherwise: look again.
			return unavailable("NATS JetStream stream %q was created meanwhile", s.opts.Stream)
		}
		if err != nil {
			return s.jsErr(err)
		}
		s.log.Info("created the NATS JetStream stream", "stream", s.opts.Stream, "subject", s.subject,
			"replicas", cfg.Replicas, "max_age", cfg.MaxAge, "max_msgs", cfg.MaxMsgs, "max_bytes", cfg.MaxBytes,
			"duplicates", cfg.Duplicates, "atomic_batches", cfg.AllowAtomicPublish)
	case err != nil:
		return s.jsErr(err)
	case s.opts.Manage:
		have := str.CachedInfo().Config
		want := s.wantConfig(have)
		if diff := configDiff(have, want); diff != "" {
			if str, err = s.js.UpdateStream(ctx, want); err != nil {
				return fmt.Errorf("updating NATS JetStream stream %q (%s): %w", s.opts.Stream, diff, s.jsErr(err))
			}
			s.log.Info("updated the NATS JetStream stream to the node's settings", "stream", s.opts.Stream, "changes", diff)
		}
	}
	return s.checkConfig(str.CachedInfo().Config)
}

// wantConfig is base with the settings evtctl manages set from the options.
func (s *Store) wantConfig(base jetstream.StreamConfig) jetstream.StreamConfig {
	cfg := base
	cfg.Subjects = slices.Clone(base.Subjects)
	if !covers(cfg.Subjects, s.subject) {
		cfg.Subjects = append(cfg.Subjects, s.subject)
	}
	cfg.Replicas = s.opts.Replicas
	cfg.Discard = jetstream.DiscardOld
	cfg.MaxAge = s.opts.Window
	cfg.MaxMsgs, cfg.MaxBytes = -1, -1
	if s.opts.MaxItems > 0 {
		cfg.MaxMsgs = int64(s.opts.MaxItems)
	}
	if s.opts.MaxBytes > 0 {
		cfg.MaxBytes = s.opts.MaxBytes
	}
	if s.dedupe {
		cfg.Duplicates = s.opts.DedupeWindow
		if cfg.MaxAge > 0 && cfg.Duplicates > cfg.MaxAge {
			cfg.Duplicates = cfg.MaxAge // JetStream wants it within the max age
		}
	}
	cfg.AllowDirect = true
	// Atomic batch publishing came with nats-server 2.12; an older server would take the
	// batch headers for plain ones.
	cfg.AllowAtomicPublish = s.caps().atomic
	return cfg
}

// configDiff describes the managed settings in which want differs from have; "" if none.
func configDiff(have, want jetstream.StreamConfig) string {
	var d []string
	add := func(name string, a, b any) { d = append(d, fmt.Sprintf("%s %v→%v", name, a, b)) }
	unlimited := func(v int64) int64 { return max(v, -1) }
	if !slices.Equal(have.Subjects, want.Subjects) {
		add("subjects", have.Subjects, want.Subjects)
	}
	if max(have.Replicas, 1) != want.Replicas {
		add("replicas", max(have.Replicas, 1), want.Replicas)
	}
	if have.Discard != want.Discard {
		add("discard", have.Discard, want.Discard)
	}
	if have.MaxAge != want.MaxAge {
		add("max_age", have.MaxAge, want.MaxAge)
	}
	if unlimited(have.MaxMsgs) != unlimited(want.MaxMsgs) {
		add("max_msgs", have.MaxMsgs, want.MaxMsgs)
	}
	if unlimited(have.MaxBytes) != unlimited(want.MaxBytes) {
		add("max_bytes", have.MaxBytes, want.MaxBytes)
	}
	if have.Duplicates != want.Duplicates {
		add("duplicate_window", have.Duplicates, want.Duplicates)
	}
	if have.AllowDirect != want.AllowDirect {
		add("allow_direct", have.AllowDirect, want.AllowDirect)
	}
	if have.AllowAtomicPublish != want.AllowAtomicPublish {
		add("allow_atomic", have.AllowAtomicPublish, want.AllowAtomicPublish)
	}
	return strings.Join(d, ", ")
}

// checkConfig refuses a stream evtctl cannot serve from and notes what it can use.
func (s *Store) checkConfig(cfg jetstream.StreamConfig) error {
	name := s.opts.Stream
	s.noteConfig(cfg)
	if cfg.Retention != jetstream.LimitsPolicy {
		return fmt.Errorf("NATS JetStream stream %q uses %s retention; evtctl needs limits retention (messages stay until a limit removes them, whoever reads them)", name, cfg.Retention)
	}
	if !cfg.AllowDirect {
		s.log.Info("the NATS JetStream stream does not allow direct gets (allow_direct): short reads go through consumers and the stream leader", "stream", name)
	}
	var writeErr error
	switch {
	case covers(cfg.Subjects, s.subject):
	case s.subjectGiven:
		return fmt.Errorf("NATS JetStream stream %q does not take subject %q (its subjects: %s)", name, s.subject, strings.Join(cfg.Subjects, ", "))
	default:
		writeErr = fmt.Errorf("%w: this node serves NATS JetStream stream %q, which evtctl did not write, read-only; to take events, name a subject the stream takes (--nats-subject; its subjects: %s)", eventlog.ErrReadOnly, name, strings.Join(cfg.Subjects, ", "))
		s.log.Info("serving a stream evtctl did not write; events are presented as CloudEvents, and ingest is off", "stream", name, "subjects", strings.Join(cfg.Subjects, ", "))
	}
	s.mu.Lock()
	s.writeErr = writeErr
	s.mu.Unlock()
	if cfg.Storage == jetstream.MemoryStorage {
		s.log.Warn("the NATS JetStream stream keeps its messages in memory: the log does not survive a restart of the NATS servers", "stream", name)
	}
	if s.dedupe && writeErr == nil && cfg.Duplicates < s.opts.DedupeWindow && !s.opts.Manage {
		s.log.Warn("the stream's duplicates window is shorter than --dedupe-window", "stream", name, "duplicates", cfg.Duplicates)
	}
	canAtomic := cfg.AllowAtomicPublish && s.caps().atomic
	want := s.opts.Batches == BatchesAtomic || s.opts.Batches == BatchesAuto && max(cfg.Replicas, 1) > 1
	s.atomic.Store(canAtomic && want)
	if !canAtomic && s.opts.Batches == BatchesAtomic && writeErr == nil {
		s.log.Warn("the NATS JetStream stream does not take atomic batches (allow_atomic; nats-server 2.12 or later): a batch of events is stored event by event, not all-or-nothing", "stream", name)
	}
	return nil
}

// covers reports whether one of the subject patterns matches subject.
func covers(patterns []string, subject string) bool {
	for _, p := range patterns {
		if subjectMatch(p, subject) {
			return true
		}
	}
	return false
}

func subjectMatch(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, t := range pt {
		switch {
		case t == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case t != "*" && t != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}
