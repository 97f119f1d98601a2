#include "node/daemon/stack/data_source_factory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/dataset.h"
#include "model/sentencepiece_tokenizer.h"
#include "model/tokenizer.h"
#include "node/train/sampler_data_source.h"

namespace skipswarm::node {

absl::StatusOr<DataNodeData> CreateDataNodeData(const NodeDaemonOptions& o) {
  DataNodeData data;
  if (o.wan.timed_forward_s > 0) {
    data.source = std::make_unique<SyntheticDataSource>(o.model.samples_per_mb,
                                                        o.model.model.seq_len, 256);
    return data;
  }
  // The tokenizer the model was configured for (--tokenizer), as train-ref.
  SS_ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tokenizer,
                      model::CreateTokenizer(o.model.tokenizer));
  if (o.model.model.vocab_size < tokenizer->vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab=", o.model.model.vocab_size, " is smaller than the ",
                     tokenizer->name(), " tokenizer's vocabulary; pass --vocab=",
                     tokenizer->vocab_size()));
  }
  SS_ASSIGN_OR_RETURN(model::Corpus corpus, model::LoadCorpus(o.model.corpus, *tokenizer));
  data.corpus = std::make_unique<model::Corpus>(std::move(corpus));
  model::SamplerOptions so;
  so.samples_per_mb = o.model.samples_per_mb;
  so.seq_len = o.model.model.seq_len;
  so.seed = o.model.seed;
  SS_ASSIGN_OR_RETURN(data.source, SamplerDataSource::Create(data.corpus->train, so));
  return data;
}

}  // namespace skipswarm::node
