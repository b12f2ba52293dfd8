/// Makes a test CA and leaves (good and deliberately flawed) with the openssl CLI, in the current folder.
let pkiScript = #"""
#!/bin/sh
# Makes a test CA and leaves (good and flawed) in the current folder with the openssl CLI.
set -e
q() { "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; "$@"; exit 1; }; }
q openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 -subj "/CN=ATSProxy E2E Test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
mkdir -p db; : > db/index.txt; echo 1000 > db/serial
cat > ca.cnf <<CNF
[ca]
default_ca = test
[test]
dir = .
database = db/index.txt
serial = db/serial
new_certs_dir = db
certificate = ca.pem
private_key = ca.key
policy = any
email_in_dn = no
copy_extensions = none
unique_subject = no
[any]
commonName = supplied
CNF
# leaf NAME SAN-HOST KEYBITS DIGEST [STARTDATE ENDDATE]
leaf() {
  name=$1; host=$2; bits=$3; md=$4
  printf "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:%s\n" "$host" > $name.ext
  q openssl req -newkey rsa:$bits -nodes -keyout $name.key -out $name.csr -subj "/CN=$host"
  if [ -n "$5" ]; then
    q openssl ca -batch -config ca.cnf -md $md -startdate $5 -enddate $6 -extfile $name.ext -in $name.csr -out $name.pem -notext
  else
    q openssl ca -batch -config ca.cnf -md $md -days 30 -extfile $name.ext -in $name.csr -out $name.pem -notext
  fi
}
leaf good good.test 2048 sha256
leaf expired expired.test 2048 sha256 20200101000000Z 20200201000000Z
leaf wronghost other.test 2048 sha256
leaf sha1 sha1.test 2048 sha1
leaf rsa1024 rsa1024.test 1024 sha256
leaf tls10 tls10.test 2048 sha256
leaf passthrough passthrough.test 2048 sha256
leaf media media-server.example.com 2048 sha256
# A wildcard leaf that also names one name two levels down, for the --passthrough/--map pattern tests.
printf "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n" > wild.ext
printf "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:*.wild.test,DNS:deep.api.wild.test\n" >> wild.ext
q openssl req -newkey rsa:2048 -nodes -keyout wild.key -out wild.csr -subj "/CN=*.wild.test"
q openssl ca -batch -config ca.cnf -md sha256 -days 30 -extfile wild.ext -in wild.csr -out wild.pem -notext
q openssl req -x509 -newkey rsa:2048 -nodes -keyout selfsigned.key -out selfsigned.pem -days 30 -subj "/CN=selfsigned.test" \
  -addext "subjectAltName=DNS:selfsigned.test" -addext "extendedKeyUsage=serverAuth"
echo ok
"""#
