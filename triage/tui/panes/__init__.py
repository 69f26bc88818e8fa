"""The four views of the main screen: Diagnosis, Machine, Upstream, Fix."""
