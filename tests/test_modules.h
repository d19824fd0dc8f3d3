// Small hookable modules mirroring accelerate's test models (tests/test_hooks.py,
// tests/test_big_modeling.py), for the parity suite.
#pragma once

#include <memory>

#include "models/causal_lm.h"
#include "models/module.h"

namespace hs::test {

/// `nn.BatchNorm1d` in eval mode: weight, bias, running_mean, running_var, num_batches_tracked.
class BatchNorm1d : public models::HookableModule {
 public:
  explicit BatchNorm1d(int64_t n) : HookableModule("BatchNorm1d") {
    register_param("weight", torch::ones({n}));
    register_param("bias", torch::zeros({n}));
    register_buf("running_mean", torch::zeros({n}));
    register_buf("running_var", torch::ones({n}));
    register_buf("num_batches_tracked", torch::zeros({}, torch::kInt64));
  }
  c10::IValue forward_impl(models::CallArgs& call) override {
    auto x = call.args.at(0).toTensor();
    return (x - get_tensor("running_mean")) / torch::sqrt(get_tensor("running_var") + 1e-5) * get_tensor("weight") +
           get_tensor("bias");
  }
};

/// accelerate's `ModelForTest`: Linear(3,4) -> BatchNorm1d(4) -> Linear(4,5).
class ModelForTest : public models::HookableModule {
 public:
  ModelForTest() : HookableModule("ModelForTest") {
    linear1 = add_child("linear1", std::make_shared<models::Linear>(3, 4, true, torch::TensorOptions()));
    batchnorm = add_child("batchnorm", std::make_shared<BatchNorm1d>(4));
    linear2 = add_child("linear2", std::make_shared<models::Linear>(4, 5, true, torch::TensorOptions()));
  }
  c10::IValue forward_impl(models::CallArgs& call) override {
    auto x = call.args.at(0).toTensor();
    auto h = (*linear1)(x);
    h = batchnorm->call_tensor({{h}, {}});
    return (*linear2)(h);
  }
  std::shared_ptr<models::Linear> linear1;
  std::shared_ptr<BatchNorm1d> batchnorm;
  std::shared_ptr<models::Linear> linear2;
};

/// accelerate's `BiggerModelForTest`: Linear(3,4), Linear(4,5), BatchNorm1d(5), Linear(5,6),
/// Linear(6,5).
class BiggerModelForTest : public models::HookableModule {
 public:
  BiggerModelForTest() : HookableModule("BiggerModelForTest") {
    auto o = torch::TensorOptions();
    linear1 = add_child("linear1", std::make_shared<models::Linear>(3, 4, true, o));
    linear2 = add_child("linear2", std::make_shared<models::Linear>(4, 5, true, o));
    batchnorm = add_child("batchnorm", std::make_shared<BatchNorm1d>(5));
    linear3 = add_child("linear3", std::make_shared<models::Linear>(5, 6, true, o));
    linear4 = add_child("linear4", std::make_shared<models::Linear>(6, 5, true, o));
  }
  c10::IValue forward_impl(models::CallArgs& call) override {
    auto x = call.args.at(0).toTensor();
    auto h = (*linear2)((*linear1)(x));
    h = batchnorm->call_tensor({{h}, {}});
    return (*linear4)((*linear3)(h));
  }
  std::shared_ptr<models::Linear> linear1, linear2, linear3, linear4;
  std::shared_ptr<BatchNorm1d> batchnorm;
};

}  // namespace hs::test
