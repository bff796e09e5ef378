#include "model/model_file.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

absl::StatusOr<ModelFile> ReadModelFile(const std::string& text,
                                        FileSystem* fs) {
  absl::StatusOr<std::string> contents = fs->ReadFile(text);
  if (contents.ok()) return ModelFile{text, *std::move(contents)};
  const std::string in_dir = absl::StrCat(text, "/model.json");
  absl::StatusOr<std::string> json = fs->ReadFile(in_dir);
  if (json.ok()) return ModelFile{in_dir, *std::move(json)};
  return contents.status();
}

}  // namespace ferry
