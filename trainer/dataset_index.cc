// Scanning an ImageNet-layout directory tree (see dataset_index.h).
#include "trainer/dataset_index.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <system_error>

namespace trainer {
namespace {

namespace fs = std::filesystem;

const char kLayout[] = "expected the ImageNet layout <root>/train/<class>/*.JPEG and <root>/val/<class>/*.JPEG";

bool IsJpegName(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpeg" || ext == ".jpg";
}

// Sorted names of the entries of `dir` that are directories (want_dirs) or regular files.
tessera::Status ListEntries(const fs::path& dir, bool want_dirs, std::vector<std::string>* names) {
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error) return tessera::InvalidArgument("cannot list " + dir.string() + ": " + error.message());
  for (; it != fs::directory_iterator(); it.increment(error)) {
    if (error) return tessera::InvalidArgument("cannot list " + dir.string() + ": " + error.message());
    std::error_code type_error;
    bool is_dir = it->is_directory(type_error);
    if (type_error) continue;
    if (is_dir == want_dirs) names->push_back(it->path().filename().string());
  }
  std::sort(names->begin(), names->end());
  return tessera::Status::Ok();
}

tessera::Status CheckDirectory(const fs::path& dir, const std::string& what) {
  std::error_code error;
  if (!fs::exists(dir, error)) return tessera::InvalidArgument(what + " " + dir.string() + " does not exist");
  if (!fs::is_directory(dir, error)) {
    return tessera::InvalidArgument(what + " " + dir.string() + " is not a directory");
  }
  return tessera::Status::Ok();
}

// Appends the images of class directory `dir` with `label`; fails if it has none.
tessera::Status ScanClass(const fs::path& dir, int label, std::vector<ImageItem>* items) {
  std::vector<std::string> files;
  TESSERA_RETURN_IF_ERROR(ListEntries(dir, false, &files));
  size_t before = items->size();
  for (const std::string& name : files) {
    if (IsJpegName(name)) items->push_back(ImageItem{(dir / name).string(), label});
  }
  if (items->size() == before) {
    return tessera::InvalidArgument("class directory " + dir.string() + " holds no .JPEG/.jpg file (" +
                                    std::to_string(files.size()) + " other files); " + kLayout);
  }
  return tessera::Status::Ok();
}

// Images directly inside a split directory mean a flat layout, which we refuse.
tessera::Status RefuseLooseImages(const fs::path& split) {
  std::vector<std::string> files;
  TESSERA_RETURN_IF_ERROR(ListEntries(split, false, &files));
  for (const std::string& name : files) {
    if (IsJpegName(name)) {
      return tessera::InvalidArgument("image " + (split / name).string() +
                                      " lies directly in the split directory, not in a class directory; " +
                                      kLayout);
    }
  }
  return tessera::Status::Ok();
}

}  // namespace

tessera::Status LoadImageNetIndex(const std::string& root, bool need_val, DatasetIndex* index) {
  *index = DatasetIndex();
  if (root.empty()) return tessera::InvalidArgument(std::string("no dataset path given; ") + kLayout);
  fs::path base(root);
  TESSERA_RETURN_IF_ERROR(CheckDirectory(base, "dataset path"));
  fs::path train = base / "train";
  TESSERA_RETURN_IF_ERROR(CheckDirectory(train, std::string(kLayout) + ", but"));
  TESSERA_RETURN_IF_ERROR(RefuseLooseImages(train));
  TESSERA_RETURN_IF_ERROR(ListEntries(train, true, &index->classes));
  if (index->classes.empty()) {
    return tessera::InvalidArgument(train.string() + " has no class directories; " + kLayout);
  }
  std::map<std::string, int> label_of;
  for (size_t i = 0; i < index->classes.size(); ++i) {
    label_of[index->classes[i]] = static_cast<int>(i);
    TESSERA_RETURN_IF_ERROR(ScanClass(train / index->classes[i], static_cast<int>(i), &index->train));
  }
  if (!need_val) return tessera::Status::Ok();

  fs::path val = base / "val";
  TESSERA_RETURN_IF_ERROR(CheckDirectory(val, std::string(kLayout) + ", but"));
  TESSERA_RETURN_IF_ERROR(RefuseLooseImages(val));
  std::vector<std::string> val_classes;
  TESSERA_RETURN_IF_ERROR(ListEntries(val, true, &val_classes));
  if (val_classes.empty()) return tessera::InvalidArgument(val.string() + " has no class directories; " + kLayout);
  for (const std::string& name : val_classes) {
    auto found = label_of.find(name);
    if (found == label_of.end()) {
      return tessera::InvalidArgument("class " + name + " of " + val.string() + " is not among the " +
                                      std::to_string(index->classes.size()) + " classes of " + train.string());
    }
    TESSERA_RETURN_IF_ERROR(ScanClass(val / name, found->second, &index->val));
  }
  return tessera::Status::Ok();
}

}  // namespace trainer
