#include "coordinator/model_intake.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

using TensorDef = ParameterLayout::TensorDef;

// Two tensors of 6 and 4 elements: 10 in all.
std::vector<TensorDef> TwoTensors() {
  return {{"fc.weight", {2, 3}}, {"fc.bias", {4}}};
}

std::vector<float> Iota(int n, float from = 0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + static_cast<float>(i);
  return v;
}

class ModelIntakeTest : public ::testing::Test {
 protected:
  ModelIntakeTest() : intake_(ModelIntakeOptions{}, &clock_) {}

  absl::StatusOr<ModelIntake::Progress> Offer(const std::string& id,
                                              std::vector<TensorDef> tensors,
                                              int64_t offset,
                                              const std::vector<float>& values,
                                              bool done) {
    ModelIntake::Offer offer;
    offer.definition_id = id;
    offer.tensors = std::move(tensors);
    offer.offset = offset;
    offer.values = values;
    offer.done = done;
    return intake_.Take(offer);
  }

  // A whole definition by `id` in two calls.
  void Define(const std::string& id) {
    const std::vector<float> all = Iota(10, 1);
    ASSERT_TRUE(
        Offer(id, TwoTensors(), 0, {all.begin(), all.begin() + 7}, false).ok());
    absl::StatusOr<ModelIntake::Progress> last =
        Offer(id, {}, 7, {all.begin() + 7, all.end()}, true);
    ASSERT_TRUE(last.ok()) << last.status();
    ASSERT_TRUE(last->defined);
  }

  FakeClock clock_;
  ModelIntake intake_;
};

TEST_F(ModelIntakeTest, ADefinitionInPiecesBecomesTheJobsModel) {
  EXPECT_FALSE(intake_.defined());
  EXPECT_FALSE(intake_.tensors().has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(intake_.Values(0, 1).status()));
  absl::StatusOr<ModelIntake::Progress> first =
      Offer("a", TwoTensors(), 0, Iota(4, 1), false);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->received, 4);
  EXPECT_FALSE(first->defined);
  EXPECT_FALSE(intake_.defined());
  absl::StatusOr<ModelIntake::Progress> last =
      Offer("a", {}, 4, Iota(6, 5), true);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->received, 10);
  EXPECT_TRUE(last->defined);
  EXPECT_TRUE(intake_.WaitDefined(absl::ZeroDuration()));

  const auto tensors = intake_.tensors();
  ASSERT_TRUE(tensors.has_value());
  ASSERT_EQ(tensors->size(), 2u);
  EXPECT_EQ((*tensors)[0].name, "fc.weight");
  EXPECT_EQ((*tensors)[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*tensors)[1].name, "fc.bias");
  absl::StatusOr<std::vector<float>> slice = intake_.Values(3, 8);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(*slice, Iota(5, 4));
  EXPECT_TRUE(absl::IsInvalidArgument(intake_.Values(8, 11).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(intake_.Values(5, 4).status()));
}

TEST_F(ModelIntakeTest, OneDefinitionAtATimeAndTheModelNeverChanges) {
  ASSERT_TRUE(Offer("a", TwoTensors(), 0, Iota(3), false).ok());
  // Another worker while "a" is at it: told to wait.
  EXPECT_TRUE(
      absl::IsAborted(Offer("b", TwoTensors(), 0, Iota(10), true).status()));
  ASSERT_TRUE(Offer("a", {}, 3, Iota(7, 3), true).ok());
  // Once defined: the definer's repeated last call is answered again, any
  // other definition is told the model exists, and nothing changes.
  absl::StatusOr<ModelIntake::Progress> again =
      Offer("a", {}, 3, Iota(7, 3), true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->defined);
  EXPECT_TRUE(absl::IsAlreadyExists(
      Offer("b", {{"other", {10}}}, 0, Iota(10, 100), true).status()));
  EXPECT_EQ(*intake_.Values(0, 10), Iota(10));
}

TEST_F(ModelIntakeTest, ASilentDefinersClaimPassesToTheNextWorker) {
  ASSERT_TRUE(Offer("a", TwoTensors(), 0, Iota(3), false).ok());
  clock_.Advance(absl::Seconds(29));
  EXPECT_TRUE(absl::IsAborted(Offer("b", TwoTensors(), 0, {}, false).status()));
  clock_.Advance(absl::Seconds(2));  // 31 s since "a" was last heard
  Define("b");
  EXPECT_EQ(*intake_.Values(0, 10), Iota(10, 1));
  // "a" comes back: its definition is over.
  EXPECT_TRUE(absl::IsAlreadyExists(Offer("a", {}, 3, Iota(7), true).status()));
}

TEST_F(ModelIntakeTest, BadPiecesAreRefusedAndFreeTheClaim) {
  // A bad tensor list.
  EXPECT_TRUE(absl::IsInvalidArgument(
      Offer("a", {{"w", {2}}, {"w", {3}}}, 0, {}, false).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(Offer("a", {{"w", {0}}}, 0, {}, false).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      Offer("", TwoTensors(), 0, Iota(3), false).status()));

  // A gap: refused, and the claim is given up at once.
  ASSERT_TRUE(Offer("a", TwoTensors(), 0, Iota(3), false).ok());
  absl::Status gap = Offer("a", {}, 5, Iota(2), false).status();
  EXPECT_TRUE(absl::IsInvalidArgument(gap));
  EXPECT_NE(gap.message().find("expected offset 3, got 5"),
            absl::string_view::npos)
      << gap;
  // A non-finite value, named by tensor and element.
  ASSERT_TRUE(Offer("b", TwoTensors(), 0, Iota(6), false).ok());
  std::vector<float> bad = Iota(4);
  bad[2] = std::numeric_limits<float>::quiet_NaN();
  absl::Status nan = Offer("b", {}, 6, bad, true).status();
  EXPECT_TRUE(absl::IsInvalidArgument(nan));
  EXPECT_NE(nan.message().find("tensor fc.bias element 2"),
            absl::string_view::npos)
      << nan;
  // Other tensors on a later call; values past the end; done too early.
  ASSERT_TRUE(Offer("c", TwoTensors(), 0, Iota(2), false).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(
      Offer("c", {{"other", {10}}}, 2, Iota(2), false).status()));
  ASSERT_TRUE(Offer("d", TwoTensors(), 0, Iota(8), false).ok());
  EXPECT_TRUE(
      absl::IsInvalidArgument(Offer("d", {}, 8, Iota(3), false).status()));
  ASSERT_TRUE(Offer("e", TwoTensors(), 0, Iota(8), false).ok());
  EXPECT_TRUE(
      absl::IsInvalidArgument(Offer("e", {}, 8, Iota(1), true).status()));
  // Over the per-call limit.
  ASSERT_TRUE(
      Offer("f", {{"big", {kMaxModelValuesPerCall + 1}}}, 0, {}, false).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(
      Offer("f", {}, 0, std::vector<float>(kMaxModelValuesPerCall + 1), false)
          .status()));
  EXPECT_FALSE(intake_.defined());
  // After all that, a good definition still defines the model.
  clock_.Advance(absl::Minutes(1));
  Define("g");
  EXPECT_TRUE(intake_.defined());
}

TEST_F(ModelIntakeTest, ADefinitionWithoutItsClaimStartsAgain) {
  // A later call of a definition this intake never saw begin (the
  // coordinator restarted mid-definition): told to start again, nothing
  // taken.
  absl::Status lost = Offer("a", {}, 4, Iota(6, 4), true).status();
  EXPECT_TRUE(absl::IsAborted(lost)) << lost;
  EXPECT_FALSE(intake_.defined());
  Define("b");  // a new definition from the start
  EXPECT_EQ(*intake_.Values(0, 10), Iota(10, 1));
}

TEST_F(ModelIntakeTest, ARepeatedPieceIsTakenOnce) {
  // The first call twice (its answer lost), without values, as the client
  // sends it.
  ASSERT_TRUE(Offer("a", TwoTensors(), 0, {}, false).ok());
  absl::StatusOr<ModelIntake::Progress> again =
      Offer("a", TwoTensors(), 0, {}, false);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->received, 0);
  ASSERT_TRUE(Offer("a", {}, 0, Iota(4), false).ok());
  absl::StatusOr<ModelIntake::Progress> repeat =
      Offer("a", {}, 0, Iota(4), false);
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_EQ(repeat->received, 4);
  ASSERT_TRUE(Offer("a", {}, 4, Iota(6, 4), true).ok());
  EXPECT_EQ(*intake_.Values(0, 10), Iota(10));
}

TEST_F(ModelIntakeTest, BuffersFollowTheParameters) {
  ModelIntake::Offer offer;
  offer.definition_id = "a";
  offer.tensors = {{"w", {2}}, {"bn.running_mean", {2}}, {"b", {2}}};
  offer.buffers = {false, true, false};
  const std::vector<float> values = Iota(6);
  offer.values = values;
  offer.done = true;
  absl::Status misplaced = intake_.Take(offer).status();
  EXPECT_TRUE(absl::IsInvalidArgument(misplaced));
  EXPECT_NE(misplaced.message().find("parameter b follows a buffer"),
            absl::string_view::npos)
      << misplaced;
  offer.buffers = {false, true};  // not one flag per tensor
  EXPECT_TRUE(absl::IsInvalidArgument(intake_.Take(offer).status()));
  offer.buffers = {false, false, true};
  offer.tensors[2].name = "bn.running_var";
  ASSERT_TRUE(intake_.Take(offer).ok());
  EXPECT_EQ(intake_.buffer_tensors(), 1);
}

TEST(ModelIntakeBuffersTest, AJobWithoutSyncStepsRefusesBuffers) {
  FakeClock clock;
  ModelIntakeOptions options;
  options.buffers_allowed = false;  // async or SSP PS
  ModelIntake intake(options, &clock);
  ModelIntake::Offer offer;
  offer.definition_id = "a";
  offer.tensors = {{"w", {2}}, {"bn.running_mean", {2}}};
  offer.buffers = {false, true};
  const std::vector<float> values = Iota(4);
  offer.values = values;
  offer.done = true;
  absl::Status refused = intake.Take(offer).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused));
  EXPECT_NE(refused.message().find("sync steps"), absl::string_view::npos)
      << refused;
  offer.tensors.pop_back();  // the same model without its buffer
  offer.buffers.clear();
  const std::vector<float> two = Iota(2);
  offer.values = two;
  ASSERT_TRUE(intake.Take(offer).ok());
  EXPECT_EQ(intake.buffer_tensors(), 0);
}

TEST(ModelIntakeSaveTest, TheDefinedModelSurvivesARestart) {
  InMemoryFileSystem fs;
  FakeClock clock;
  ModelIntakeOptions options;
  options.fs = &fs;
  options.save_path = "/state/worker_model.safetensors";
  {
    ModelIntake intake(options, &clock);
    absl::StatusOr<bool> loaded = intake.Load();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_FALSE(*loaded);  // nothing saved yet
    // A save that fails leaves the model undefined; the call can be retried.
    ModelIntake::Offer offer;
    offer.definition_id = "a";
    offer.tensors = TwoTensors();
    offer.buffers = {false, true};  // fc.bias stands for a buffer here
    const std::vector<float> values = Iota(10, 0.5f);
    offer.values = values;
    offer.done = true;
    fs.FailWrites(absl::UnavailableError("disk gone"));
    EXPECT_TRUE(absl::IsUnavailable(intake.Take(offer).status()));
    EXPECT_FALSE(intake.defined());
    fs.FailWrites(absl::OkStatus());
    offer.tensors.clear();
    offer.buffers.clear();
    ASSERT_TRUE(intake.Take(offer).ok());
    EXPECT_TRUE(intake.defined());
  }
  ModelIntake restarted(options, &clock);
  absl::StatusOr<bool> loaded = restarted.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(*loaded);
  EXPECT_TRUE(restarted.defined());
  ASSERT_EQ(restarted.tensors()->size(), 2u);
  EXPECT_EQ((*restarted.tensors())[1].name, "fc.bias");
  EXPECT_EQ(restarted.buffer_tensors(), 1);
  EXPECT_EQ(*restarted.Values(0, 10), Iota(10, 0.5f));

  // A corrupt save is an error, not an empty model.
  fs.SetFileContents(options.save_path, "not safetensors");
  ModelIntake broken(options, &clock);
  EXPECT_TRUE(absl::IsInvalidArgument(broken.Load().status()));
}

// The defining worker's optimizer (parameter groups by tensor name, rate
// tables) becomes the job's once the model is defined, and is saved with it;
// one that names a tensor the model lacks, or a buffer, refuses the
// definition.
TEST(ModelIntakeOptimizerTest, TheDefinersOptimizerIsCheckedKeptAndSaved) {
  InMemoryFileSystem fs;
  FakeClock clock;
  ModelIntakeOptions options;
  options.fs = &fs;
  options.save_path = "/state/worker_model.safetensors";
  v1::OptimizerSpec optimizer;
  optimizer.set_kind(v1::OPTIMIZER_ADAMW);
  optimizer.set_lr(0.001);
  optimizer.set_weight_decay(0.1);
  optimizer.set_beta1(0.9);
  optimizer.set_beta2(0.999);
  optimizer.set_epsilon(1e-8);
  optimizer.add_lr_by_step(0.0005);
  optimizer.add_lr_by_step(0.001);
  v1::ParamGroup* group = optimizer.add_groups();
  group->add_tensors("nope");
  group->set_lr(0.002);
  ModelIntake::Offer offer;
  offer.definition_id = "a";
  offer.tensors = TwoTensors();
  offer.buffers = {false, true};  // fc.bias stands for a buffer here
  const std::vector<float> values = Iota(10, 0.5f);
  offer.values = values;
  offer.done = true;
  offer.optimizer = optimizer;
  {
    ModelIntake intake(options, &clock);
    absl::Status unknown = intake.Take(offer).status();
    EXPECT_TRUE(absl::IsInvalidArgument(unknown));
    EXPECT_NE(unknown.message().find("'nope', which is not one of the job's"),
              absl::string_view::npos)
        << unknown;
    offer.optimizer->mutable_groups(0)->set_tensors(0, "fc.bias");
    absl::Status buffer = intake.Take(offer).status();
    EXPECT_NE(buffer.message().find("a buffer"), absl::string_view::npos)
        << buffer;
    EXPECT_FALSE(intake.defined());
    EXPECT_FALSE(intake.optimizer().has_value());
    offer.optimizer->mutable_groups(0)->set_tensors(0, "fc.weight");
    ASSERT_TRUE(intake.Take(offer).ok());
    ASSERT_TRUE(intake.optimizer().has_value());
    EXPECT_EQ(intake.optimizer()->SerializeAsString(),
              offer.optimizer->SerializeAsString());
  }
  ModelIntake restarted(options, &clock);
  ASSERT_TRUE(restarted.Load().ok());
  ASSERT_TRUE(restarted.optimizer().has_value());
  EXPECT_EQ(restarted.optimizer()->SerializeAsString(),
            offer.optimizer->SerializeAsString());
  // A definition without an optimizer leaves the job's own.
  ModelIntake other(ModelIntakeOptions{}, &clock);
  offer.optimizer.reset();
  ASSERT_TRUE(other.Take(offer).ok());
  EXPECT_FALSE(other.optimizer().has_value());
}

// --init-from: the job starts from the file's values, by tensor name, not
// the defining worker's; a worker whose tensors are not exactly the file's
// is refused, naming the tensor.
TEST(ModelIntakeInitFromTest, TheFilesValuesReplaceTheDefinersByName) {
  FakeClock clock;
  ModelIntakeOptions options;
  options.init_from_path = "/init/model.safetensors";
  SafetensorsFile file;
  // In another order than the model's: matched by name.
  file.tensors.push_back({"fc.bias", {4}, SafetensorsDtype::kF32, Iota(4, 60)});
  file.tensors.push_back(
      {"fc.weight", {2, 3}, SafetensorsDtype::kF32, Iota(6, 50)});
  options.init_from = file;
  ModelIntake intake(options, &clock);
  ModelIntake::Offer offer;
  offer.definition_id = "a";
  offer.tensors = {{"fc.weight", {3, 2}}, {"fc.bias", {4}}};
  const std::vector<float> values = Iota(10);
  offer.values = values;
  offer.done = true;
  absl::Status misshapen = intake.Take(offer).status();
  EXPECT_TRUE(absl::IsInvalidArgument(misshapen));
  EXPECT_NE(misshapen.message().find("fc.weight"), absl::string_view::npos)
      << misshapen;
  offer.tensors = {{"fc.weight", {2, 3}}};
  offer.values = absl::MakeConstSpan(values).first(6);
  absl::Status leftover = intake.Take(offer).status();
  EXPECT_NE(leftover.message().find("fc.bias is not one of the model's"),
            absl::string_view::npos)
      << leftover;
  offer.tensors = TwoTensors();
  offer.values = values;
  ASSERT_TRUE(intake.Take(offer).ok());
  std::vector<float> want = Iota(6, 50);
  for (float v : Iota(4, 60)) want.push_back(v);
  EXPECT_EQ(*intake.Values(0, 10), want);
}

}  // namespace
}  // namespace ferry
