"""The tf_keras layers BertModel (modeling.py) is built from: the small functions and blocks
(layers), multi-head attention and the attention masks (attention), the transformer stack
with gradient checkpointing (transformer). modeling.py re-exports every public name."""
