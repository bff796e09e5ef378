// The model JSON that `--model` text names: the file itself, or model.json
// inside it when it is a directory (a model directory: model.json +
// model.safetensors, docs/models.md).
//
// Thread safety: as the FileSystem.
#ifndef FERRY_MODEL_MODEL_FILE_H_
#define FERRY_MODEL_MODEL_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/file_system.h"

namespace ferry {

struct ModelFile {
  std::string path;  // the file read: `text` or `text`/model.json
  std::string contents;
};

// Reads `text`, else `text`/model.json. When neither reads, the error of
// reading `text` itself (NOT_FOUND when it does not exist), for the caller
// to word.
absl::StatusOr<ModelFile> ReadModelFile(const std::string& text,
                                        FileSystem* fs);

}  // namespace ferry

#endif  // FERRY_MODEL_MODEL_FILE_H_
