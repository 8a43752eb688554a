// Package examples holds example YAML configuration files for engine-core
// and api-frontend (--config FILE); its test loads each one through
// configs.Load so they stay in step with the configuration structs.
package examples
