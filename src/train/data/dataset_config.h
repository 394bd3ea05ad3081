#pragma once
// A dataset from a config's key/value map (the `data:` section of a training config, the studio's forms):
//   type: idx     dir (with split [train]: <split>-images-idx3-ubyte[.gz], <split>-labels-idx1-ubyte[.gz])
//                 or images and labels (two IDX files); classes: mnist, fashion-mnist or a list of names
//                 [the numbers of the labels]
//   type: folder  path; channels [0: the first image's]; height, width [0: keep each image's size]
//   type: list    list, labels (the labels file); channels; height, width
//   type: lmdb    path
// Errors name the key ("dataset (type idx): key 'dir' is required") or the file. A config's typed values
// (OptionMap) convert with params_from_options (params.h).
#include <map>
#include <memory>
#include <string>

#include "train/data/dataset.h"

namespace kiln::train {

using DatasetParams = std::map<std::string, std::string>;

Result<std::shared_ptr<const Dataset>> open_dataset(const DatasetParams& params);

}  // namespace kiln::train
