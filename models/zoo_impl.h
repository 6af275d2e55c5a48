/* zoo_impl.h — the bundled models' builders, behind the registry of models/model.c. Each builds
 * the layer tree of one model for a data spec (image shape, classes, options) into *out, or
 * returns RG_EINVAL with a message naming the model and the shape it cannot take. */
#ifndef RG_ZOO_IMPL_H
#define RG_ZOO_IMPL_H

#include "ringgrad/model.h"

typedef rg_status (*rg_zoo_build_fn)(const rg_model_spec *s, uint64_t seed, rg_layer **out);

rg_status rg_zoo_cnn(const rg_model_spec *s, uint64_t seed, rg_layer **out);      /* zoo.c */
rg_status rg_zoo_mlp(const rg_model_spec *s, uint64_t seed, rg_layer **out);      /* zoo.c */
rg_status rg_zoo_resnet18(const rg_model_spec *s, uint64_t seed, rg_layer **out); /* resnet.c */
rg_status rg_zoo_resnet34(const rg_model_spec *s, uint64_t seed, rg_layer **out);
rg_status rg_zoo_resnet50(const rg_model_spec *s, uint64_t seed, rg_layer **out);
rg_status rg_zoo_resnet20(const rg_model_spec *s, uint64_t seed, rg_layer **out);
rg_status rg_zoo_resnet56(const rg_model_spec *s, uint64_t seed, rg_layer **out);

/* The pixels per image of the smallest plane that one of the model's BatchNorm2d normalises, for
 * the spec's images (rg_model_bn_plane); the models without BatchNorm2d have none. */
typedef int64_t (*rg_zoo_bn_plane_fn)(const rg_model_spec *s);
int64_t rg_zoo_resnet_bn_plane(const rg_model_spec *s);       /* resnet18/34/50 */
int64_t rg_zoo_resnet_cifar_bn_plane(const rg_model_spec *s); /* resnet20/56 */

#endif
