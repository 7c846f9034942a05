// Tests of the recipe arithmetic: the batch-size schedule, the linear scaling rule with
// gradual warm-up and decay, dynamic loss scaling, and the settings parser's errors.
#include <gtest/gtest.h>

#include <cmath>

#include "trainer/recipe.h"
#include "trainer/train_settings.h"

namespace trainer {
namespace {

TEST(BatchSchedule, PerEpochGlobalBatch) {
  BatchSchedule schedule;
  ASSERT_TRUE(BatchSchedule::Parse("0:256,5:512,30:1024", &schedule).ok());
  EXPECT_EQ(schedule.GlobalBatch(0), 256);
  EXPECT_EQ(schedule.GlobalBatch(4), 256);
  EXPECT_EQ(schedule.GlobalBatch(5), 512);
  EXPECT_EQ(schedule.GlobalBatch(29), 512);
  EXPECT_EQ(schedule.GlobalBatch(89), 1024);
  EXPECT_EQ(schedule.ToString(), "0:256,5:512,30:1024");
  EXPECT_TRUE(schedule.CheckDivisible(256).ok());
  tessera::Status status = schedule.CheckDivisible(3);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("256"), std::string::npos);

  ASSERT_TRUE(BatchSchedule::Parse("64", &schedule).ok());
  EXPECT_EQ(schedule.GlobalBatch(0), 64);
  EXPECT_EQ(schedule.GlobalBatch(100), 64);
}

TEST(BatchSchedule, MalformedSchedulesAreRefused) {
  BatchSchedule schedule;
  for (const char* bad : {"", "0", "-4", "1:256", "0:256,0:512", "0:256,5:", "0:256;5:512", "x", "0:256,3:0"}) {
    EXPECT_FALSE(BatchSchedule::Parse(bad, &schedule).ok()) << bad;
  }
}

TEST(LrSchedule, LinearScalingWarmupAndStepDecay) {
  LrSchedule lr;  // 0.1 at 256, 5 warm-up epochs from 0.1, x0.1 at 30, 60, 80
  const int64_t batch = 8192;
  const double target = 0.1 * 8192 / 256;  // 3.2, Goyal et al.
  EXPECT_DOUBLE_EQ(lr.At(0.0, batch), 0.1);
  EXPECT_NEAR(lr.At(2.5, batch), 0.1 + (target - 0.1) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(lr.At(5.0, batch), target);
  EXPECT_DOUBLE_EQ(lr.At(29.99, batch), target);
  EXPECT_NEAR(lr.At(30.0, batch), target * 0.1, 1e-12);
  EXPECT_NEAR(lr.At(85.0, batch), target * 0.001, 1e-12);
  // The rate rises strictly during warm-up.
  for (double t = 0.1; t < 5.0; t += 0.1) EXPECT_GT(lr.At(t, batch), lr.At(t - 0.1, batch));
}

TEST(LrSchedule, SmallBatchesDoNotWarmDown) {
  LrSchedule lr;  // 0.1 at 256
  EXPECT_DOUBLE_EQ(lr.At(0.0, 64), 0.025);
  EXPECT_DOUBLE_EQ(lr.At(2.0, 64), 0.025);
  lr.warmup_start_lr = 0.0;  // explicit start from zero
  EXPECT_DOUBLE_EQ(lr.At(0.0, 64), 0.0);
  EXPECT_DOUBLE_EQ(lr.At(2.5, 64), 0.0125);
}

TEST(LrSchedule, BatchSizeControlChangesTheTarget) {
  LrSchedule lr;
  lr.warmup_epochs = 0;
  EXPECT_DOUBLE_EQ(lr.At(1.0, 256), 0.1);
  EXPECT_DOUBLE_EQ(lr.At(6.0, 512), 0.2);  // doubled batch, doubled rate
}

TEST(LrSchedule, CosineAndPolyReachZeroAtTheEnd) {
  LrSchedule lr;
  lr.total_epochs = 90;
  lr.decay = LrDecay::kCosine;
  EXPECT_DOUBLE_EQ(lr.At(5.0, 256), 0.1);
  EXPECT_NEAR(lr.At(47.5, 256), 0.05, 1e-12);
  EXPECT_NEAR(lr.At(90.0, 256), 0.0, 1e-12);
  lr.decay = LrDecay::kPoly;
  EXPECT_NEAR(lr.At(47.5, 256), 0.1 * 0.25, 1e-12);
  EXPECT_NEAR(lr.At(90.0, 256), 0.0, 1e-12);
}

TEST(DynamicLossScale, HalvesOnOverflowAndGrowsAfterCleanSteps) {
  DynamicLossScale scale(1024.0, 3);
  EXPECT_FALSE(scale.Update(true));  // overflow: skip the step
  EXPECT_DOUBLE_EQ(scale.scale(), 512.0);
  EXPECT_TRUE(scale.Update(false));
  EXPECT_TRUE(scale.Update(false));
  EXPECT_DOUBLE_EQ(scale.scale(), 512.0);
  EXPECT_TRUE(scale.Update(false));  // third clean step: grow
  EXPECT_DOUBLE_EQ(scale.scale(), 1024.0);
  EXPECT_EQ(scale.clean_steps(), 0);
  scale.Restore(8.0, 2);
  EXPECT_TRUE(scale.Update(false));
  EXPECT_DOUBLE_EQ(scale.scale(), 16.0);
}

tessera::Status Parse(std::vector<const char*> args, TrainSettings* settings) {
  args.insert(args.begin(), "train_resnet");
  return ParseTrainSettings(static_cast<int>(args.size()), args.data(), settings);
}

TEST(TrainSettings, ParsesTheRecipeFlags) {
  TrainSettings s;
  tessera::Status status = Parse({"--data=/d", "--batch=0:64,5:128", "--lr=0.2", "--optimizer=lars", "--blocks=1,1,1,1",
                                  "--wire_dtype=bfloat16", "--lr_decay=cosine", "--synthetic"},
                                 &s);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(s.data, "/d");
  EXPECT_EQ(s.batches.GlobalBatch(7), 128);
  EXPECT_DOUBLE_EQ(s.lr.base_lr, 0.2);
  EXPECT_EQ(s.optimizer, OptimizerKind::kLars);
  EXPECT_EQ(s.blocks, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(s.wire_type, WireType::kBfloat16);
  EXPECT_EQ(s.lr.decay, LrDecay::kCosine);
  EXPECT_TRUE(s.synthetic);
  EXPECT_FALSE(s.loss_scaling);  // bf16 needs none
  ASSERT_TRUE(Parse({"--data=/d", "--precision=fp16", "--device=cuda"}, &s).ok());
  EXPECT_TRUE(s.loss_scaling);  // fp16 turns it on by default
  EXPECT_NE(TrainSettingsHelp().find("--wire_dtype=float32"), std::string::npos);
}

// --help shows the struct's own defaults, the one place they are written.
TEST(TrainSettings, HelpShowsTheStructDefaults) {
  const TrainSettings d;
  const std::string help = TrainSettingsHelp();
  for (const std::string& flag :
       {"--epochs=" + std::to_string(d.epochs), "--synthetic_images=" + std::to_string(d.synthetic_images),
        "--reference_batch=" + std::to_string(d.lr.reference_batch), "--out=" + d.out_dir,
        std::string("--synthetic=0"), std::string("--lr_decay=") + LrDecayName(d.lr.decay)}) {
    EXPECT_NE(help.find("  " + flag + " "), std::string::npos) << flag << " not in\n" << help;
  }
}

TEST(TrainSettings, BadFlagsNameTheFlag) {
  TrainSettings s;
  struct Case {
    std::vector<const char*> args;
    const char* message;
  };
  std::vector<Case> cases = {
      {{"--data=/d", "--lr=fast"}, "--lr=fast"},
      {{"--data=/d", "--bogus=1"}, "unknown flag --bogus"},
      {{"--data=/d", "--blocks=3,4"}, "--blocks=3,4"},
      {{"--data=/d", "--batch=0:256,2:"}, "batch schedule"},
      {{"--data=/d", "--precision=fp8"}, "one of bf16, fp16, fp32"},
      {{"--data=/d", "--crop_size=224", "--val_resize=200"}, "smaller than --crop_size"},
      {{}, "no dataset"},
      {{"positional"}, "unexpected argument"},
  };
  for (const Case& c : cases) {
    tessera::Status status = Parse(c.args, &s);
    ASSERT_FALSE(status.ok()) << c.message;
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace trainer
