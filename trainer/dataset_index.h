// The list of images of a dataset in the ImageNet layout:
//
//   <root>/train/<wnid>/*.JPEG      one directory per class (e.g. n01440764)
//   <root>/val/<wnid>/*.JPEG        the same class directories
//
// Classes are the train directories in sorted order (label = position), as
// torchvision's ImageFolder numbers them; files within a class are sorted by name, so
// every rank builds the same index. Files are matched by extension (.jpeg, .jpg, any
// case); whether they really are JPEGs is found out when they are decoded.
//
// A missing or malformed dataset path is an InvalidArgument error whose message says what
// was expected and what was found (no train/ directory, images directly under train/
// instead of in class directories, a class with no images, a val/ class unknown to
// train/, ...).
#ifndef TESSERA_TRAINER_DATASET_INDEX_H_
#define TESSERA_TRAINER_DATASET_INDEX_H_

#include <string>
#include <vector>

#include "base/status.h"

namespace trainer {

struct ImageItem {
  std::string path;
  int label = 0;
};

struct DatasetIndex {
  std::vector<std::string> classes;  // wnids; label i is classes[i]
  std::vector<ImageItem> train;
  std::vector<ImageItem> val;
};

// Scans <root>/train and, if `need_val`, <root>/val.
tessera::Status LoadImageNetIndex(const std::string& root, bool need_val, DatasetIndex* index);

}  // namespace trainer

#endif  // TESSERA_TRAINER_DATASET_INDEX_H_
