package jobspec

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Check reports the first problem of a Kafka source spec (Parse checks
// every spec; connectors check configs built in code with it too).
func (k *KafkaSourceSpec) Check() error {
	if len(k.Brokers) == 0 {
		return errors.New("needs brokers")
	}
	switch {
	case len(k.Topics) > 0 && k.TopicPattern != "":
		return errors.New("topics and topic_pattern are exclusive")
	case len(k.Topics) == 0 && k.TopicPattern == "":
		return errors.New("needs topics or topic_pattern")
	}
	for _, t := range k.Topics {
		if t == "" {
			return errors.New("empty topic name")
		}
	}
	if k.TopicPattern != "" {
		if _, err := regexp.Compile(k.TopicPattern); err != nil {
			return fmt.Errorf("topic_pattern: %v", err)
		}
	}
	if err := k.SASL.check(); err != nil {
		return err
	}
	switch k.Isolation {
	case "", KafkaReadCommitted, KafkaReadUncommitted:
	default:
		return fmt.Errorf("isolation %q (want %s or %s)", k.Isolation, KafkaReadCommitted, KafkaReadUncommitted)
	}
	if k.StopAt != "" && k.StopAt != KafkaStopAtLatest {
		return fmt.Errorf("stop_at %q (want %s, or nothing for an unbounded source)", k.StopAt, KafkaStopAtLatest)
	}
	if d := k.DiscoveryInterval; d != nil && *d < 0 {
		return errors.New("discovery_interval must not be negative")
	}
	switch k.Start {
	case "", KafkaStartEarliest, KafkaStartLatest:
		if k.StartTimestamp != "" {
			return fmt.Errorf("start_timestamp needs start: %s", KafkaStartTimestamp)
		}
	case KafkaStartTimestamp:
		if _, err := k.StartMillis(); err != nil {
			return err
		}
	case KafkaStartGroup:
		if k.Group == "" {
			return fmt.Errorf("start: %s needs a group", KafkaStartGroup)
		}
	default:
		return fmt.Errorf("start %q (want %s, %s, %s or %s)", k.Start, KafkaStartEarliest, KafkaStartLatest, KafkaStartTimestamp, KafkaStartGroup)
	}
	return nil
}

// StartMillis parses StartTimestamp: RFC 3339 or milliseconds since the
// epoch.
func (k *KafkaSourceSpec) StartMillis() (int64, error) {
	if k.StartTimestamp == "" {
		return 0, fmt.Errorf("start: %s needs start_timestamp", KafkaStartTimestamp)
	}
	if ms, err := strconv.ParseInt(k.StartTimestamp, 10, 64); err == nil {
		if ms < 0 {
			return 0, fmt.Errorf("start_timestamp %d is negative", ms)
		}
		return ms, nil
	}
	ts, err := time.Parse(time.RFC3339Nano, k.StartTimestamp)
	if err != nil {
		return 0, fmt.Errorf("start_timestamp %q is neither RFC 3339 nor milliseconds", k.StartTimestamp)
	}
	return ts.UnixMilli(), nil
}

// Check reports the first problem of a Kafka sink spec; checkpointing
// tells whether the job has a checkpoint section.
func (k *KafkaSinkSpec) Check(checkpointing bool) error {
	if len(k.Brokers) == 0 {
		return errors.New("needs brokers")
	}
	if k.Topic == "" {
		return errors.New("needs a topic")
	}
	if err := k.SASL.check(); err != nil {
		return err
	}
	if k.TransactionTimeout < 0 {
		return errors.New("transaction_timeout must not be negative")
	}
	switch k.Delivery {
	case "", KafkaAtLeastOnce:
		if k.TransactionalIDPrefix != "" {
			return fmt.Errorf("transactional_id_prefix needs delivery: %s", KafkaExactlyOnce)
		}
	case KafkaExactlyOnce:
		if !checkpointing {
			return fmt.Errorf("delivery %s needs a checkpoint section (transactions commit when checkpoints complete)", KafkaExactlyOnce)
		}
	default:
		return fmt.Errorf("delivery %q (want %s or %s)", k.Delivery, KafkaAtLeastOnce, KafkaExactlyOnce)
	}
	return nil
}

// check reports the first problem of a SASL section; nil is none.
func (a *KafkaSASL) check() error {
	if a == nil {
		return nil
	}
	switch a.Mechanism {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		return fmt.Errorf("sasl.mechanism %q (want %s, %s or %s)", a.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if a.Username == "" {
		return errors.New("sasl needs a username")
	}
	if a.PasswordEnv == "" {
		return errors.New("sasl needs password_env (the environment variable that holds the password on the workers)")
	}
	return nil
}
