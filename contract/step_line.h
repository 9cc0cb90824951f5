// The step a built-in trainer's progress line reports. A finished step's line starts with
// "step N/TOTAL " (the train job, worker/train_job.cc), "iteration N/TOTAL " (the GPT job,
// Megatron's format, worker/gpt_train_job.cc) or "step N param_hash " (--print_param_hash,
// worker/training_step.cc). ds-launch reads it from the lines it routes: an elastic rescale then
// knows the last step logged before a failure, which the last heartbeat (once a second) may not.
#pragma once

#include <cstdint>
#include <string>

namespace ds {

// N for a progress line (after its "[rank R] " tag), -1 for any other line.
inline int64_t loggedStep(const std::string& text) {
  size_t i = 0;
  if (text.starts_with("step "))
    i = 5;
  else if (text.starts_with("iteration "))
    i = 10;
  else
    return -1;
  int64_t step = 0;
  const size_t first = i;
  while (i < text.size() && i - first < 18 && text[i] >= '0' && text[i] <= '9')
    step = step * 10 + (text[i++] - '0');
  if (i == first || i == text.size() || (text[i] != '/' && text[i] != ' ')) return -1;
  return step;
}

}  // namespace ds
