package fsm

import (
	"fmt"
	"unicode/utf8"
)

const (
	maxIDLen      = 256
	maxTenantLen  = 63
	maxModuleLen  = 128
	maxSlots      = 1 << 16
	maxMessageLen = 4096
)

// checkTenantID: lowercase letters, digits, '-' and '_', starting with a
// letter or digit, at most 63 bytes (so it fits a DNS label and a path
// segment).
func checkTenantID(id string) error {
	if id == "" || len(id) > maxTenantLen {
		return fmt.Errorf("tenant id %q: want 1 to %d characters: %w", id, maxTenantLen, ErrMalformed)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '_')
		if !ok {
			return fmt.Errorf("tenant id %q: want [a-z0-9][a-z0-9_-]*: %w", id, ErrMalformed)
		}
	}
	return nil
}

// checkModuleName: letters, digits, '.', '-' and '_', starting with a
// letter or digit; no '@', which separates the version in a reference.
func checkModuleName(name string) error {
	if name == "" || len(name) > maxModuleLen {
		return fmt.Errorf("module name %q: want 1 to %d characters: %w", name, maxModuleLen, ErrMalformed)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '-' || c == '_' || c == '.')
		if !ok {
			return fmt.Errorf("module name %q: want [A-Za-z0-9][A-Za-z0-9._-]*: %w", name, ErrMalformed)
		}
	}
	return nil
}

// checkID checks an opaque identifier (worker, coordinator, job, task):
// non-empty UTF-8 without control characters.
func checkID(kind, id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%s id %q: want 1 to %d bytes: %w", kind, id, maxIDLen, ErrMalformed)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%s id %q: not UTF-8: %w", kind, id, ErrMalformed)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s id %q: control character: %w", kind, id, ErrMalformed)
		}
	}
	return nil
}

func checkSHA256(digest string) error {
	if len(digest) != 64 {
		return fmt.Errorf("sha256 %q: want 64 hex digits: %w", digest, ErrMalformed)
	}
	for i := 0; i < len(digest); i++ {
		c := digest[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("sha256 %q: want lowercase hex: %w", digest, ErrMalformed)
		}
	}
	return nil
}

// checkModuleRef checks the form of a pinned module reference, not that
// the module exists.
func checkModuleRef(m ModuleRef) error {
	if m.Ref == "" {
		return fmt.Errorf("module %s: no reference: %w", m.Name, ErrMalformed)
	}
	if err := checkModuleName(m.Name); err != nil {
		return err
	}
	if m.Version < 1 {
		return fmt.Errorf("module %s version %d: %w", m.Name, m.Version, ErrMalformed)
	}
	if err := checkSHA256(m.SHA256); err != nil {
		return fmt.Errorf("module %s: %w", m.Name, err)
	}
	return nil
}

func checkAttempt(attempt int) error {
	if attempt < 1 {
		return fmt.Errorf("attempt %d: want >= 1: %w", attempt, ErrMalformed)
	}
	return nil
}

// clip bounds a free-text message so that one huge error string cannot bloat
// the replicated state; it cuts at a rune boundary, deterministically.
func clip(msg string) string {
	if len(msg) <= maxMessageLen {
		return msg
	}
	cut := maxMessageLen
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

func (c *CreateTenant) validate() error {
	if err := checkTenantID(c.ID); err != nil {
		return err
	}
	return c.Quota.validate()
}

func (c *RegisterCoordinator) validate() error {
	if err := checkID("coordinator", c.ID); err != nil {
		return err
	}
	if c.RaftAddress == "" {
		return fmt.Errorf("coordinator %q: no raft address: %w", c.ID, ErrMalformed)
	}
	return nil
}

func (c *RegisterModule) validate() error {
	if err := checkTenantID(c.Tenant); err != nil {
		return err
	}
	if err := checkModuleName(c.Name); err != nil {
		return err
	}
	if err := checkSHA256(c.SHA256); err != nil {
		return err
	}
	if c.Size < 0 {
		return fmt.Errorf("module %q: size %d: %w", c.Name, c.Size, ErrMalformed)
	}
	return nil
}

func (c *RegisterWorker) validate() error {
	if err := checkID("worker", c.ID); err != nil {
		return err
	}
	if c.Address == "" {
		return fmt.Errorf("worker %q: no address: %w", c.ID, ErrMalformed)
	}
	if c.Slots < 1 || c.Slots > maxSlots {
		return fmt.Errorf("worker %q: %d slots, want 1 to %d: %w", c.ID, c.Slots, maxSlots, ErrMalformed)
	}
	return nil
}

func (c *WorkerDown) validate() error { return checkID("worker", c.ID) }

func (c *SubmitJob) validate() error {
	if err := checkTenantID(c.Tenant); err != nil {
		return err
	}
	if c.Name == "" {
		return fmt.Errorf("job: no name: %w", ErrMalformed)
	}
	if len(c.Tasks) == 0 {
		return fmt.Errorf("job %q: no tasks: %w", c.Name, ErrMalformed)
	}
	seen := make(map[string]bool, len(c.Tasks))
	for _, t := range c.Tasks {
		if err := checkID("task", t); err != nil {
			return fmt.Errorf("job %q: %w", c.Name, err)
		}
		if seen[t] {
			return fmt.Errorf("job %q: task %q twice: %w", c.Name, t, ErrMalformed)
		}
		seen[t] = true
	}
	for _, m := range c.Modules {
		if err := checkModuleRef(m); err != nil {
			return fmt.Errorf("job %q: %w", c.Name, err)
		}
	}
	if c.RequestID != "" {
		if err := checkID("request", c.RequestID); err != nil {
			return fmt.Errorf("job %q: %w", c.Name, err)
		}
	}
	if len(c.CheckpointStorage) > maxMessageLen || len(c.FromSavepoint) > maxMessageLen {
		return fmt.Errorf("job %q: checkpoint storage or savepoint of more than %d bytes: %w", c.Name, maxMessageLen, ErrMalformed)
	}
	return nil
}

func (c *PlaceJob) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	if err := checkAttempt(c.Attempt); err != nil {
		return fmt.Errorf("job %s: %w", c.JobID, err)
	}
	if len(c.Deployment) == 0 {
		return fmt.Errorf("job %s: empty deployment: %w", c.JobID, ErrMalformed)
	}
	return nil
}

func (c *JobWaiting) validate() error { return checkID("job", c.JobID) }

func (c *TaskFinished) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	if err := checkAttempt(c.Attempt); err != nil {
		return fmt.Errorf("job %s: %w", c.JobID, err)
	}
	return checkID("task", c.TaskID)
}

func (c *TaskFailed) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	if err := checkAttempt(c.Attempt); err != nil {
		return fmt.Errorf("job %s: %w", c.JobID, err)
	}
	return checkID("task", c.TaskID)
}

func (c *FinishJob) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	return checkAttempt(c.Attempt)
}

func (c *FailJob) validate() error { return checkID("job", c.JobID) }

func (c *CancelJob) validate() error {
	if err := checkTenantID(c.Tenant); err != nil {
		return err
	}
	return checkID("job", c.JobID)
}

func checkCheckpointID(job string, id uint64) error {
	if id == 0 {
		return fmt.Errorf("job %s: checkpoint id 0: %w", job, ErrMalformed)
	}
	return nil
}

func (c *TriggerCheckpoint) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	if err := checkAttempt(c.Attempt); err != nil {
		return fmt.Errorf("job %s: %w", c.JobID, err)
	}
	if c.Swap != 0 && !c.Savepoint {
		return fmt.Errorf("job %s checkpoint %d of swap %d: a swap is carried out by a savepoint: %w", c.JobID, c.ID, c.Swap, ErrMalformed)
	}
	return checkCheckpointID(c.JobID, c.ID)
}

func (c *CheckpointCompleted) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	if err := checkAttempt(c.Attempt); err != nil {
		return fmt.Errorf("job %s: %w", c.JobID, err)
	}
	if err := checkCheckpointID(c.JobID, c.ID); err != nil {
		return err
	}
	switch {
	case c.Manifest == "" || len(c.Manifest) > maxMessageLen:
		return fmt.Errorf("job %s checkpoint %d: manifest key of %d bytes: %w", c.JobID, c.ID, len(c.Manifest), ErrMalformed)
	case c.Duration < 0 || c.FullSize < 0 || c.IncrementalSize < 0 || c.SwapPause < 0:
		return fmt.Errorf("job %s checkpoint %d: negative duration or size: %w", c.JobID, c.ID, ErrMalformed)
	case !c.Savepoint && c.Retain < 1:
		return fmt.Errorf("job %s checkpoint %d: retain %d, want at least 1: %w", c.JobID, c.ID, c.Retain, ErrMalformed)
	}
	return nil
}

func (c *CheckpointFailed) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	return checkCheckpointID(c.JobID, c.ID)
}

func (c *CheckpointsDeleted) validate() error {
	if err := checkID("job", c.JobID); err != nil {
		return err
	}
	if len(c.IDs) == 0 {
		return fmt.Errorf("job %s: no checkpoint ids: %w", c.JobID, ErrMalformed)
	}
	return nil
}
