// The capabilities a GradientExchange (worker/gradient_exchange.h) may have
// beyond what every exchange does: each a small interface that some modes'
// exchanges implement and a trainer or the training loop asks for with
// GradientExchange::capability<C>() (nullptr when the exchange lacks it) or
// RequireCapability<C>() (INVALID_ARGUMENT naming the mode and the
// capability). Whether an exchange has a capability is fixed when it is
// made (e.g. the PS exchange has EmbeddingRowExchange only for a job with
// embedding tables), never per step.
//
//   capability              exchanges that have it
//   EmbeddingRowExchange    PS and ring with embedding tables, hybrid,
//                           local with tables
//   PartialBufferExchange   PS
//   EndOfTrainingExchange   ring
//   CommittedStepsObserver  ring
//   StepWeightsExchange     PS
//   AbsentGradientExchange  PS, ring
//
// Ownership: a capability is the exchange itself (or a part it owns); it
// lives as long as the exchange. Thread safety: as the exchange's methods,
// unless a method says otherwise.
#ifndef FERRY_WORKER_EXCHANGE_CAPABILITIES_H_
#define FERRY_WORKER_EXCHANGE_CAPABILITIES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "model/embedding_bag.h"
#include "model/embedding_row_source.h"

namespace ferry {

// The base of every capability; each derived interface names itself in
// kName (unique: it is the key GradientExchange::capability<C>() looks up
// and what a missing capability's error says).
class ExchangeCapability {
 protected:
  ~ExchangeCapability() = default;
};

// Jobs with embedding tables (DLRM): the exchange gives each step its
// batch's rows and takes their gradients with the step.
class EmbeddingRowExchange : public ExchangeCapability {
 public:
  static constexpr char kName[] = "embedding tables";

  // Between BeginStep and FinishStep: where the open step reads its batch's
  // rows (PS and hybrid: one row pull from the shards at the version
  // BeginStep pulled; ring: the member's own tables; local: the process's
  // store). nullptr without an open step (ring and hybrid).
  virtual EmbeddingRowSource* embedding_rows() = 0;

  // The open step's row gradients (per table its unique ids and the sums
  // over the step's samples), once per step, before FinishStep; FinishStep
  // then commits them with the dense gradient (PS: with the push, so a
  // shard applies both or neither). A step without samples declares none
  // ({}). Errors: FAILED_PRECONDITION without an open step or a second
  // time; INVALID_ARGUMENT for rows in a step without samples (hybrid); a
  // transport failure may surface here or in FinishStep.
  virtual absl::Status ReadyRows(const std::vector<SparseRows>& rows) = 0;

 protected:
  ~EmbeddingRowExchange() = default;
};

// Steps whose buffers hold only part of the model (ExchangeStep.buffers: a
// PS pipeline stage's, holding its layers' range and its state's); the rest
// of the step's gradient is declared zeros without a buffer behind it.
// Exchanges without it hold the whole buffer, declare zeros with Ready and
// refuse ExchangeStep.buffers with INVALID_ARGUMENT.
class PartialBufferExchange : public ExchangeCapability {
 public:
  static constexpr char kName[] = "steps with partial buffers";

  // Declares [offset, offset + length) of the step's gradient final and all
  // zeros (on the PS: the chunks travel as flags, without bytes). Counts as
  // a Ready() of the range. Errors as Ready()'s.
  virtual absl::Status ReadyZeros(int64_t offset, int64_t length) = 0;

 protected:
  ~PartialBufferExchange() = default;
};

// Steps whose gradient may leave parameters out: a PyTorch worker's
// parameter that no sample of the step used keeps .grad None, and torch's
// optimizers then skip it (no momentum, no weight decay). An element that
// every contributor of a step leaves out is skipped by the job's optimizer
// (the shards' in PS mode, every member's in ring mode); one used by any
// contributor is updated with the mean gradient, the others' zeros
// included. Exchanges without it take such ranges as zeros (Ready).
class AbsentGradientExchange : public ExchangeCapability {
 public:
  static constexpr char kName[] = "absent gradients";

  // Declares [offset, offset + length) of the step's gradient final, zero
  // (the buffer holds zeros there) and absent. Only parameters, never the
  // model's non-trainable state. Counts as a Ready() of the range; errors
  // as Ready()'s.
  virtual absl::Status ReadyAbsent(int64_t offset, int64_t length) = 0;

 protected:
  ~AbsentGradientExchange() = default;
};

// Exchanges with work to do once the coordinator ended the job (FINISH).
class EndOfTrainingExchange : public ExchangeCapability {
 public:
  static constexpr char kName[] = "end-of-training work";

  // Called once, by every member, before FinalWeights (ring pipelines: the
  // members gather every stage's current weights from each other; every
  // member of the last generation must call it). Errors:
  // DEADLINE_EXCEEDED or the transport's when a member is gone.
  virtual absl::Status EndOfTraining() = 0;

 protected:
  ~EndOfTrainingExchange() = default;
};

// Exchanges that keep state only to undo steps the coordinator may still
// abort (the ring's rollback copies).
class CommittedStepsObserver : public ExchangeCapability {
 public:
  static constexpr char kName[] = "committed-step tracking";

  // Any thread: the coordinator has applied and saved the first `steps`
  // steps (HeartbeatResponse.committed_steps): no ring re-forms before
  // them, so state kept only to undo them may go.
  virtual void ObserveCommitted(int64_t steps) = 0;
  // Training thread: whether the state kept per uncommitted step is large
  // enough that the worker should learn of each commit as soon as the
  // coordinator makes it (a report answered once its step is applied,
  // NextTaskRequest.await_applied) rather than with its next lease. The
  // wait is off the step's path, but a step shorter than the coordinator's
  // round trip would wait for the previous report's answer.
  virtual bool WantsPromptCommits() const = 0;
  // Training thread, between two steps: whether the next step should begin
  // only once this one is committed, because its undo state lies in memory
  // the next step's backward pass overwrites (a sharded ring member's
  // rollback copy in its gradient buffer outside its slice). The loop then
  // waits for the report's answer (WantsPromptCommits) before the next
  // BeginStep; without the wait the exchange moves the copy into memory of
  // its own there.
  virtual bool WantsCommitBeforeNextStep() const = 0;
  // Training thread: how often undo state had to move out of such memory
  // because its step was not committed in time (a ring step aborted, or
  // the commit's answer late).
  virtual int64_t undo_state_moves() const = 0;

 protected:
  ~CommittedStepsObserver() = default;
};

// Exchanges whose FinishStep leaves the weights the step made on the far
// side (PS: the shards apply it); they can bring them in right after it.
// Exchanges without it (ring, local) hold them in buffers.params once
// FinishStep returns.
class StepWeightsExchange : public ExchangeCapability {
 public:
  static constexpr char kName[] = "the step's weights after it";

  // After a FinishStep that succeeded: waits until buffers.host_params
  // hold the weights of the version the step made, and returns true, when
  // they were already on their way (the PS pull started ahead for a lease
  // that named its contributors); false when they come only with the next
  // BeginStep (a coordinator-finalized or async step, or the pull ahead
  // failed). The next BeginStep then uses them without pulling again.
  virtual bool AwaitStepWeights() = 0;

 protected:
  ~StepWeightsExchange() = default;
};

}  // namespace ferry

#endif  // FERRY_WORKER_EXCHANGE_CAPABILITIES_H_
