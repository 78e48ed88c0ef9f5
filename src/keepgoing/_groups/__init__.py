"""Scale-to-zero worker groups: deploy specs, images, backends, secrets and the autoscaler."""
