// The GPT trainer behind `train --config X.yml` (GPT-NeoX-style YAML): a GPT language model
// (runtime/model/gpt.h) on an indexed dataset through the ZeRO engine, with evaluation on the
// validation split, checkpoints, monitors and a generated sample at the end.
#pragma once

#include <atomic>

#include "contract/job_args.h"
#include "kernels/accelerator.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/neox_config.h"
#include "runtime/train/train_result.h"
#include "worker/coordinator_client.h"
#include "worker/progress_board.h"
#include "worker/training_grid.h"

namespace ds::worker {

// Collective: every rank calls it with the same configuration, on its place of the job's grid
// (worker/training_grid.h).
// `tokenizer` is the job's (runtime::makeJobTokenizer), loaded once by the caller. The model's
// passes run on `accelerator` (kernels::jobAccelerator); the engine's states stay in host memory.
runtime::TrainResult trainGpt(const runtime::GptTrainConfig& gpt,
                              const runtime::Tokenizer& tokenizer,
                              const runtime::DeepSpeedConfig& config, const TrainOptions& options,
                              const JoinResult& join, const TrainingGrid& grid,
                              ProgressBoard& board, const std::atomic<bool>& stopRequested,
                              kernels::Accelerator& accelerator);

}  // namespace ds::worker
