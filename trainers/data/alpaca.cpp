// The Alpaca instruction format. The prompt wording is Stanford Alpaca's PROMPT_DICT; records
// with an empty "input" use the shorter prompt, as Stanford's train.py does. The response
// follows "### Response:" after a newline, matching the "text" column of tatsu-lab/alpaca (the
// dataset the guide trains on), so ddx's documents are the ones the guide tokenises.
#include "data/dataset_internal.h"

namespace ddx::data {

std::string format_alpaca(const std::string& instruction, const std::string& input, const std::string& output) {
  std::string text;
  text.reserve(instruction.size() + input.size() + output.size() + 256);
  if (input.empty()) {
    text += "Below is an instruction that describes a task. "
            "Write a response that appropriately completes the request.\n\n";
  } else {
    text += "Below is an instruction that describes a task, paired with an input that provides "
            "further context. Write a response that appropriately completes the request.\n\n";
  }
  text += "### Instruction:\n";
  text += instruction;
  if (!input.empty()) {
    text += "\n\n### Input:\n";
    text += input;
  }
  text += "\n\n### Response:\n";
  text += output;
  return text;
}

}  // namespace ddx::data
