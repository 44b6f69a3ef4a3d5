// Tests that the verifiers check every labelled invariant of the pipe dialect's
// ops (PipeOps.td) and attributes (PipeAttrs.td), one case each, and that
// each message ends with its label.
// RUN: hypipe-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// Tests that pipe.stage (stage_c1) refuses a stage whose index is not vp_stage * pp + pp_rank.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
// expected-error @+1 {{stage 0 on rank 1, chunk 0 does not fit pp = 2, vpp = 1 (index must be vp_stage * pp + pp_rank) (stage_c1)}}
  pipe.stage 0 rank 1 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 0 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 0 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.stage (stage_c2) refuses a pipe.yield without the stage's result types.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
// expected-error @+1 {{'pipe.stage' op must end in pipe.yield of the result types (stage_c2)}}
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.stage (stage_c3) refuses stages out of index order.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
// expected-error @+1 {{'pipe.stage' op stage 1 out of order: expected stage 0 (stage_c3)}}
  pipe.stage 1 rank 1 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 0 stage 0 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.stage (stage_c3) refuses a last stage other than pp * vpp - 1.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  // expected-error @+1 {{'pipe.stage' op the last stage must be stage 1, got 0 (stage_c3)}}
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    %2 = hybrid.mlp %1 : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.stage (stage_c4) refuses an input that is neither a model argument nor an earlier stage's result.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %bad = "test.source"() : () -> tensor<1x4xi64>
// expected-error @+1 {{'pipe.stage' op inputs must be model arguments or results of earlier stages (stage_c4)}}
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%bad : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.send (send_c1) refuses a send to the stage's own rank.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    // expected-error @+1 {{peer 0 must be a rank in [0, 2) other than the stage's own (0) (send_c1)}}
    pipe.send %1 to 0 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.send (send_c1) refuses a send to a stage other than the next.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    // expected-error @+1 {{'pipe.send' op peer_stage must be 1, got 3 (send_c1)}}
    pipe.send %1 to 1 stage 3 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.recv (recv_c1) refuses a receive from a stage other than the previous one.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    // expected-error @+1 {{'pipe.recv' op peer_stage must be 0, got 1 (recv_c1)}}
    %x = pipe.recv from 0 stage 1 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.send_grad (send_grad_c1) refuses sending the gradient of a value this stage did not receive.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.send_grad' op must send the gradient of a pipe.recv of this stage, back to its peer and stage (send_grad_c1)}}
    pipe.send_grad %2 to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.recv_grad (recv_grad_c1) refuses receiving the gradient of a value this stage did not send.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    // expected-error @+1 {{'pipe.recv_grad' op must receive the gradient of a value this stage sends to the same peer and stage (recv_grad_c1)}}
    pipe.recv_grad %h from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.grad_allreduce (grad_allreduce_c1) refuses a dp other than the model's.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    // expected-error @+1 {{'pipe.grad_allreduce' op dp must equal the model's dp (2) and be at least 2 (grad_allreduce_c1)}}
    pipe.grad_allreduce dp 4
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.tied_embedding_allreduce (tied_embedding_allreduce_c1) refuses a model that does not tie its embeddings.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    // expected-error @+1 {{'pipe.tied_embedding_allreduce' op the model does not tie its embeddings (tied_embedding_allreduce_c1)}}
    pipe.tied_embedding_allreduce with 1
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.tied_embedding_allreduce (tied_embedding_allreduce_c1) refuses a peer other than the rank of the other end.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    // expected-error @+1 {{'pipe.tied_embedding_allreduce' op peer must be the rank of the other end (1), on a different rank (tied_embedding_allreduce_c1)}}
    pipe.tied_embedding_allreduce with 0
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.program (program_c1) refuses programs out of rank order.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  pipe.program rank 0 "1f1b" ["0F0"]
  // expected-error @+1 {{program of rank 0 out of order: expected rank 1 (pp = 2) (program_c1)}}
  pipe.program rank 0 "1f1b" ["0F1"]
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.program (program_c2) refuses an action that does not parse.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  // expected-error @+1 {{'pipe.program' op action 1: '0X0' has no known op: use F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD or REDUCE_GRAD (program_c2)}}
  pipe.program rank 0 "1f1b" ["0F0", "0X0"]
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.program (program_c2) refuses an action whose stage is on another rank.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  // expected-error @+1 {{'pipe.program' op action 0 ('1F0') runs stage 1, which is on rank 1 (program_c2)}}
  pipe.program rank 0 "1f1b" ["1F0"]
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that #pipe.range (range_c1) refuses a negative offset.
// expected-error @+1 {{offset -4 and bytes 16 must be non-negative (range_c1)}}
"test.op"() {r = #pipe.range<offset = -4, bytes = 16, dtype = f32>} : () -> ()

// -----

// Tests that #pipe.range (range_c2) refuses a dtype that is not f32 or bf16.
// expected-error @+1 {{dtype 'i32' is not f32 or bf16 (range_c2)}}
"test.op"() {r = #pipe.range<offset = 0, bytes = 16, dtype = i32>} : () -> ()

// -----

// Tests that #pipe.range (range_c3) refuses a range not aligned to its elements.
// expected-error @+1 {{offset 2 and bytes 16 must be multiples of the 4-byte 'f32' (range_c3)}}
"test.op"() {r = #pipe.range<offset = 2, bytes = 16, dtype = f32>} : () -> ()

// -----

// Tests that pipe.target is the target enum, not a string.
// expected-error @+1 {{'pipe.target' is a #pipe.target on a hybrid.model}}
"test.op"() {pipe.target = "cuda"} : () -> ()

// -----

// Tests that pipe.target names a target hypipe has.
// expected-error @+2 {{expected ::hypipe::pipe::Target to be one of: cpu, cuda}}
// expected-error @+1 {{failed to parse Pipe_TargetAttr parameter 'value' which is to be a `::hypipe::pipe::Target`}}
"test.op"() {pipe.target = #pipe<target tpu>} : () -> ()

// -----

// Tests that pipe.precision is a float type a model trains in.
// expected-error @+1 {{'pipe.precision' is f32 or bf16 on a hybrid.model}}
"test.op"() {pipe.precision = i32} : () -> ()

// -----

// Tests that an attribute the pipe dialect does not define is refused.
// expected-error @+1 {{unknown pipe attribute 'pipe.kernels'}}
"test.op"() {pipe.kernels = 1 : i64} : () -> ()

// -----

// Tests that pipe.kernel_program (kernel_program_c1) needs all three passes, in order.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op must hold its layers, then a backward_weight pass where it holds nothing (kernel_program_c1)}}
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_program (kernel_program_c1) refuses a layer after the passes begin.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op must hold its layers, then a backward_weight pass where it holds pipe.kernel_layer (kernel_program_c1)}}
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      %late = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 0, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 0 : i64}
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_program (kernel_program_c2) refuses a buffer size that is not a whole number of floats.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op buffer sizes must be non-negative multiples of 4 bytes, got 2114 (kernel_program_c2)}}
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2114, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_program (kernel_program_c2) refuses activations of a type the kernels do not keep.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op activations must be f32 or bf16, not 'f16' (kernel_program_c2)}}
    pipe.kernel_program activations f16 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_program (kernel_program_c3) refuses a layer range outside its buffer.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      // expected-error @+1 {{'pipe.kernel_layer' op its saved range #pipe.range<offset = 1316, bytes = 592, dtype = f32> lies outside the 1904-byte buffer (kernel_program_c3)}}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1316, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_program (kernel_program_c3) refuses two layers whose parameter ranges overlap.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      // expected-error @+1 {{'pipe.kernel_layer' op its parameter range #pipe.range<offset = 508, bytes = 1056, dtype = f32> overlaps #pipe.range<offset = 0, bytes = 512, dtype = f32> (kernel_program_c3)}}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 508, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_program (kernel_program_c3) refuses an activation slot that is not one activation.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op act1 #pipe.range<offset = 128, bytes = 64, dtype = f32> must hold one 128-byte activation (kernel_program_c3)}}
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 64, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_program (kernel_program_c3) refuses workspace parts that overlap.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op its workspace range #pipe.range<offset = 252, bytes = 384, dtype = f32> overlaps #pipe.range<offset = 128, bytes = 128, dtype = f32> (kernel_program_c3)}}
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 252, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_program (kernel_program_c4) refuses a shared tensor outside the parameters.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op its shared range #pipe.range<offset = 2048, bytes = 512, dtype = f32> lies outside the 2112-byte buffer (kernel_program_c4)}}
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> shared_output <offset = 2048, bytes = 512, dtype = f32> shared_table <offset = 0, bytes = 512, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_layer (kernel_layer_c1) refuses a shape without one of its kind's fields.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      // expected-error @+1 {{'pipe.kernel_layer' op its shape is not a mlp shape: field 'ffn' is missing or not an i64 (kernel_layer_c1)}}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_layer (kernel_layer_c1) refuses an activation hypipe does not have.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      // expected-error @+1 {{'pipe.kernel_layer' op its shape is not a mlp shape: field 'activation' is missing or not an activation name (kernel_layer_c1)}}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "tanh", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_layer (kernel_layer_c1) refuses a field its kind does not have.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      // expected-error @+1 {{'pipe.kernel_layer' op its shape is not a head shape: it has 5 fields, a head shape 4 (kernel_layer_c1)}}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64, rope = true}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_layer (kernel_layer_c2) refuses a parameter range of another size than its shape's.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      // expected-error @+1 {{'pipe.kernel_layer' op its parameter range #pipe.range<offset = 1568, bytes = 540, dtype = f32> is not the shape's 544 bytes of f32 (kernel_layer_c2)}}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 540, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_layer (kernel_layer_c2) refuses a bf16 range (the kernels keep f32 buffers).
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      // expected-error @+1 {{'pipe.kernel_layer' op its saved range #pipe.range<offset = 0, bytes = 144, dtype = bf16> is not the shape's 144 bytes of f32 (kernel_layer_c2)}}
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = bf16> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_pass (kernel_pass_c1) holds only kernel calls and copies.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        // expected-error @+1 {{'test.op' op is not a kernel call or copy, nor a save (forward) or a load or recompute (backward_input) (kernel_pass_c1)}}
        "test.op"() : () -> ()
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_pass (kernel_pass_c2) refuses a forward call that reads a slot the call before it did not write.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        // expected-error @+1 {{'pipe.kernel_call' op reads act1 where the call before it wrote act0 (kernel_pass_c2)}}
        pipe.kernel_call %mlp1(act1) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_pass (kernel_pass_c2) refuses a first input-gradient call that does not read the output's gradient.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        // expected-error @+1 {{'pipe.kernel_call' op reads input where the call before it wrote grad_output (kernel_pass_c2)}}
        pipe.kernel_call %head(input) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_pass (kernel_pass_c2) refuses a weight-gradient call that writes a slot.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        // expected-error @+1 {{'pipe.kernel_call' op a weight-gradient call reads and writes no slot (kernel_pass_c2)}}
        pipe.kernel_call %mlp1(none) -> act0
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.kernel_copy (kernel_copy_c1) copies between two different slots.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        // expected-error @+1 {{'pipe.kernel_copy' op copies between two different slots, not act1 -> act1 (kernel_copy_c1)}}
        pipe.kernel_copy act1 -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pipe.stage (stage_c5) holds one kernel program, just before its pipe.yield.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op must be its stage's only kernel program, just before the pipe.yield (stage_c5)}}
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}


// -----

// Tests that pipe.kernel_call (kernel_call_c1) calls a layer of its own program.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %loss = pipe.stage 0 rank 0 chunk 0 inputs(%tokens, %labels : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%t: tensor<1x4xi64>, %l: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mlp %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    %other = "test.op"() : () -> !pipe.layer
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1904, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 1312, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        // expected-error @+1 {{'pipe.kernel_call' op must call a pipe.kernel_layer of its own program (kernel_call_c1)}}
        pipe.kernel_call %other(none) -> none
      }
    }
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that a recomputed layer needs the program's recompute buffer (kernel_program_c5).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        // expected-error @+1 {{'pipe.kernel_layer' op is recomputed in a program without a recompute buffer (kernel_program_c5)}}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that the recompute slots lie apart from the workspace's other parts (kernel_program_c5).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      // expected-error @+1 {{'pipe.kernel_program' op its workspace range #pipe.range<offset = 512, bytes = 128, dtype = f32> overlaps #pipe.range<offset = 256, bytes = 384, dtype = f32> (kernel_program_c3)}}
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 512, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a recomputed layer's saved range lies inside the recompute buffer (kernel_program_c5).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1024 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        // expected-error @+1 {{'pipe.kernel_layer' op its recomputed range #pipe.range<offset = 0, bytes = 1168, dtype = f32> lies outside the 1024-byte buffer (kernel_program_c5)}}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a load reads a range a forward save wrote (kernel_program_c6).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          // expected-error @+1 {{'pipe.kernel_load' op reads #pipe.range<offset = 576, bytes = 128, dtype = f32>, which no pipe.kernel_save of the forward wrote (kernel_program_c6)}}
          pipe.kernel_load <offset = 576, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a save keeps one activation (kernel_program_c6).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          // expected-error @+1 {{'pipe.kernel_save' op must keep one 128-byte activation, not #pipe.range<offset = 704, bytes = 64, dtype = f32> (kernel_program_c6)}}
          pipe.kernel_save act0 -> <offset = 704, bytes = 64, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a recomputed layer's input gradient follows its recompute (kernel_program_c7).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          // expected-error @+1 {{'pipe.kernel_call' op runs the input gradient of a recomputed layer before its forward ran again (kernel_program_c7)}}
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a save is the forward's (kernel_pass_c1).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
          // expected-error @+1 {{'pipe.kernel_save' op is not a kernel call or copy, nor a save (forward) or a load or recompute (backward_input) (kernel_pass_c1)}}
          pipe.kernel_save act1 -> <offset = 736, bytes = 128, dtype = f32>
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a save keeps the slot the forward last wrote (kernel_pass_c2).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          // expected-error @+1 {{'pipe.kernel_save' op keeps act1 where the call before it wrote act0 (kernel_pass_c2)}}
          pipe.kernel_save act1 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a recompute reads what the recompute chain last wrote (kernel_pass_c2).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          // expected-error @+1 {{'pipe.kernel_recompute' op reads rc1 where the recompute before it wrote rc0 (kernel_pass_c2)}}
          pipe.kernel_recompute %mlp1(rc1) -> rc0
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that the gradient chain does not use a recompute slot (kernel_pass_c2).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          // expected-error @+1 {{'pipe.kernel_call' op uses a recompute slot outside the recomputed forward (kernel_pass_c2)}}
          pipe.kernel_call %mlp1(act0) -> rc1
          pipe.kernel_call %embedding(rc1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a load writes a recompute slot (kernel_load_c1).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          // expected-error @+1 {{'pipe.kernel_load' op writes rc0 or rc1, not act1 (kernel_load_c1)}}
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> act1
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that only a recomputed layer is recomputed (kernel_recompute_c1).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 864, workspace 896) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 1168 rc0 <offset = 640, bytes = 128, dtype = f32> rc1 <offset = 768, bytes = 128, dtype = f32> {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> recomputed <offset = 0, bytes = 1168, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 144, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_save act0 -> <offset = 736, bytes = 128, dtype = f32>
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          // expected-error @+1 {{'pipe.kernel_recompute' op must recompute a recomputed pipe.kernel_layer of its own program (kernel_recompute_c1)}}
          pipe.kernel_recompute %head(none) -> none
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_load <offset = 736, bytes = 128, dtype = f32> -> rc0
          pipe.kernel_recompute %mlp1(rc0) -> rc1
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }

// -----

// Tests that a selective layer recomputes only modules of its kind (kernel_layer_c3).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1232, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 640 {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        // expected-error @+1 {{'pipe.kernel_layer' op recomputes modules selective recompute does not drop of a mlp layer, or is both recomputed and selective (kernel_layer_c3)}}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 528, dtype = f32> recompute ["core_attn", "layernorm"] <offset = 0, bytes = 640, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 672, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_recompute %mlp1(none) -> none
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a selective layer's recomputed range holds exactly its modules' tensors (kernel_layer_c3).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1232, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 640 {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        // expected-error @+1 {{'pipe.kernel_layer' op its recomputed range #pipe.range<offset = 0, bytes = 512, dtype = f32> is not its modules' 640 bytes of f32 (kernel_layer_c3)}}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 528, dtype = f32> recompute ["mlp", "layernorm"] <offset = 0, bytes = 512, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 672, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_recompute %mlp1(none) -> none
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a selective layer names each module once (kernel_layer_c3).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1232, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 640 {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        // expected-error @+1 {{'pipe.kernel_layer' op its recompute list names mlp twice (kernel_layer_c3)}}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 528, dtype = f32> recompute ["mlp", "mlp"] <offset = 0, bytes = 640, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 672, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          pipe.kernel_recompute %mlp1(none) -> none
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }


// -----

// Tests that a selective layer's recompute reads and writes no slot (kernel_recompute_c1).
  hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
  ^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
    %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
    ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
      %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
      %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
      %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
      %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
      pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 2112, saved 1232, workspace 640) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 384, dtype = f32> recompute 640 {
        %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
        %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 512, bytes = 1056, dtype = f32> saved <offset = 144, bytes = 528, dtype = f32> recompute ["mlp", "layernorm"] <offset = 0, bytes = 640, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
        %head = pipe.kernel_layer head layer 0 "" params <offset = 1568, bytes = 544, dtype = f32> saved <offset = 672, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
        pipe.kernel_pass forward {
          pipe.kernel_call %embedding(none) -> act0
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %head(act1) -> none
        }
        pipe.kernel_pass backward_input {
          pipe.kernel_call %head(none) -> act0
          // expected-error @+1 {{'pipe.kernel_recompute' op reads and writes none, not rc0 (kernel_recompute_c1)}}
          pipe.kernel_recompute %mlp1(none) -> rc0
          pipe.kernel_call %mlp1(act0) -> act1
          pipe.kernel_call %embedding(act1) -> none
        }
        pipe.kernel_pass backward_weight {
          pipe.kernel_call %head(none) -> none
          pipe.kernel_call %mlp1(none) -> none
          pipe.kernel_call %embedding(none) -> none
        }
      }
      pipe.yield %4 : tensor<f32>
    }
    hybrid.return %0 : tensor<f32>
  }

// -----

// Tests that a tensor-parallel program splits over at least 2 ranks (kernel_program_c8).
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1, tp = 2>, pattern = "-"} {
^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
  %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
    %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    // expected-error @+1 {{'pipe.kernel_program' op splits its layers over at least 2 tensor-parallel ranks, and sequence_parallel needs them (kernel_program_c8)}}
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 1088, saved 1392, workspace 512) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 256, dtype = f32> tensor_parallel 1 {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 256, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 256, bytes = 544, dtype = f32> saved <offset = 144, bytes = 784, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 800, bytes = 288, dtype = f32> saved <offset = 928, bytes = 464, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0 collectives ["all_reduce:8"]
        pipe.kernel_call %mlp1(act0) -> act1 collectives ["all_reduce:8"]
        pipe.kernel_call %head(act1) -> none collectives ["all_reduce_max:1", "all_reduce:1", "all_reduce:1"]
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0 collectives ["all_reduce:8"]
        pipe.kernel_call %mlp1(act0) -> act1 collectives ["all_reduce:8"]
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %4 : tensor<f32>
  }
  hybrid.return %0 : tensor<f32>
}

// -----

// Tests that a layer splits over the program's tensor-parallel ranks only where they divide it (kernel_layer_c4).
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1, tp = 2>, pattern = "-"} {
^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
  %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
    %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 1088, saved 1392, workspace 512) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 256, dtype = f32> tensor_parallel 3 {
      // expected-error @+1 {{'pipe.kernel_layer' op does not split over 3 tensor-parallel ranks: vocab_size (16) is not a multiple of the tensor-parallel size 3 (kernel_layer_c4)}}
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 256, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 256, bytes = 544, dtype = f32> saved <offset = 144, bytes = 784, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 800, bytes = 288, dtype = f32> saved <offset = 928, bytes = 464, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0 collectives ["all_reduce:8"]
        pipe.kernel_call %mlp1(act0) -> act1 collectives ["all_reduce:8"]
        pipe.kernel_call %head(act1) -> none collectives ["all_reduce_max:1", "all_reduce:1", "all_reduce:1"]
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0 collectives ["all_reduce:8"]
        pipe.kernel_call %mlp1(act0) -> act1 collectives ["all_reduce:8"]
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %4 : tensor<f32>
  }
  hybrid.return %0 : tensor<f32>
}

// -----

// Tests that a call lists the collectives its layer runs (kernel_call_c2).
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1, tp = 2>, pattern = "-"} {
^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
  %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
    %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 1088, saved 1392, workspace 512) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 256, dtype = f32> tensor_parallel 2 {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 256, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 256, bytes = 544, dtype = f32> saved <offset = 144, bytes = 784, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 800, bytes = 288, dtype = f32> saved <offset = 928, bytes = 464, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0 collectives ["all_reduce:8"]
        // expected-error @+1 {{'pipe.kernel_call' op lists the collectives none where its layer runs ["all_reduce:8"] (kernel_call_c2)}}
        pipe.kernel_call %mlp1(act0) -> act1
        pipe.kernel_call %head(act1) -> none collectives ["all_reduce_max:1", "all_reduce:1", "all_reduce:1"]
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0 collectives ["all_reduce:8"]
        pipe.kernel_call %mlp1(act0) -> act1 collectives ["all_reduce:8"]
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %4 : tensor<f32>
  }
  hybrid.return %0 : tensor<f32>
}

// -----

// Tests that a recomputed layer's forward runs its collectives again (kernel_recompute_c2).
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1, tp = 2>, pattern = "-"} {
^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
  %0 = pipe.stage 0 rank 0 chunk 0 inputs(%arg0, %arg1 : tensor<1x4xi64>, tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%arg2: tensor<1x4xi64>, %arg3: tensor<1x4xi64>):
    %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %2 = hybrid.mlp %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %4 = hybrid.output %3, %arg3 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1 buffers(params 1088, saved 736, workspace 768) act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256, bytes = 256, dtype = f32> recompute 784 rc0 <offset = 512, bytes = 128, dtype = f32> rc1 <offset = 640, bytes = 128, dtype = f32> tensor_parallel 2 {
      %embedding = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 256, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
      %mlp1 = pipe.kernel_layer mlp layer 1 "decoder.layers.0." params <offset = 256, bytes = 544, dtype = f32> recomputed <offset = 0, bytes = 784, dtype = f32> shape {activation = "gelu", ffn = 16 : i64, hidden = 8 : i64}
      %head = pipe.kernel_layer head layer 0 "" params <offset = 800, bytes = 288, dtype = f32> saved <offset = 144, bytes = 464, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = false, vocab = 16 : i64}
      pipe.kernel_pass forward {
        pipe.kernel_call %embedding(none) -> act0 collectives ["all_reduce:8"]
        pipe.kernel_save act0 -> <offset = 608, bytes = 128, dtype = f32>
        pipe.kernel_call %mlp1(act0) -> act1 collectives ["all_reduce:8"]
        pipe.kernel_call %head(act1) -> none collectives ["all_reduce_max:1", "all_reduce:1", "all_reduce:1"]
      }
      pipe.kernel_pass backward_input {
        pipe.kernel_call %head(none) -> act0 collectives ["all_reduce:8"]
        pipe.kernel_load <offset = 608, bytes = 128, dtype = f32> -> rc0
        // expected-error @+1 {{'pipe.kernel_recompute' op lists the collectives ["all_reduce:64"] where its layer runs ["all_reduce:8"] (kernel_recompute_c2)}}
        pipe.kernel_recompute %mlp1(rc0) -> rc1 collectives ["all_reduce:64"]
        pipe.kernel_call %mlp1(act0) -> act1 collectives ["all_reduce:8"]
        pipe.kernel_call %embedding(act1) -> none
      }
      pipe.kernel_pass backward_weight {
        pipe.kernel_call %head(none) -> none
        pipe.kernel_call %mlp1(none) -> none
        pipe.kernel_call %embedding(none) -> none
      }
    }
    pipe.yield %4 : tensor<f32>
  }
  hybrid.return %0 : tensor<f32>
}
