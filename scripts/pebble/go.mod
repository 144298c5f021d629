module firstbyte.invalid/tools/pebble

go 1.19

require github.com/letsencrypt/pebble/v2 v2.4.0

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/letsencrypt/challtestsrv v1.2.1 // indirect
	github.com/miekg/dns v1.1.48 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/crypto v0.14.0 // indirect
	golang.org/x/mod v0.6.0-dev.0.20220106191415-9b9b3d81d5e3 // indirect
	golang.org/x/net v0.17.0 // indirect
	golang.org/x/sys v0.13.0 // indirect
	golang.org/x/tools v0.1.10 // indirect
	golang.org/x/xerrors v0.0.0-20220411194840-2f41105eb62f // indirect
	gopkg.in/square/go-jose.v2 v2.6.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
